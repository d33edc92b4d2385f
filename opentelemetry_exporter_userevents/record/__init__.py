# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""The wire contract: what our records hold, for the writer and the reader alike.

- :mod:`.schema`: every field of every record, its type and meaning, and packing;
- :mod:`.unpack`: reading fields where a tracepoint's ``format`` file says they are;
- :mod:`.tracepoints`: tracepoint names and which schema each has;
- :mod:`.flags`: every flag bit; :mod:`.json_keys`: every JSON key of events, links, scope;
- :mod:`.anyvalue` and :mod:`.plain_text`: the value encoding of text fields.
"""
