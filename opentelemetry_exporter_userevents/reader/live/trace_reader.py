# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Collect span, log and resource records from tracefs, in a ring buffer of our own.

The reader creates a tracefs instance (``instances/otel-userevents.<pid>.<start>.<n>.
pidns<inode>``, :mod:`.tracefs_instance`), so it neither drains nor disturbs the global
buffer or another reader. It enables every version of our tracepoints (multi-format
``<prefix>_span.<id>``, ``<prefix>_log_<class>.<id>``, ``<prefix>_resource.<id>``, and the
single-format fallback in ``user_events``), resource tracepoints first, and rescans for
versions that appear later. It reads the per-CPU ``trace_pipe_raw`` pages, decodes records
by their tracepoint's ``format`` file, merges CPUs by timestamp, and counts what the kernel
lost (:mod:`.cpu_pipes`). Closing disables everything and removes the instance; an instance
left by a killed reader is removed at the next start of a reader in the same pid namespace.

With ``providers`` it also reads EventHeader tracepoints (the Rust, C++ and .NET exporters'
records: :mod:`.eventheader_providers`), holding a named provider's usual ones from the
start, and the metric exporters' ``otlp_metrics`` (held from the start too). Under ``*``
a thread of its own answers announcements and runs the rescans
(:mod:`.announcement_thread`), so a new service is listened to whatever the caller's loop
is doing. Rescans then no longer wait for a read: a record of a deleted tracepoint still in
the buffer when the kernel gives its event id to a new one is decoded with the new format
(the checks count it when it does not fit), where a read first decoded it with its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from opentelemetry_exporter_userevents.abi.format import parse_format
from opentelemetry_exporter_userevents.abi.ring_buffer import PageLayout
from opentelemetry_exporter_userevents.abi.tracefs import Tracefs, TracefsError, find_tracefs
from opentelemetry_exporter_userevents.abi.uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from opentelemetry_exporter_userevents.reader.decode.decoder import RecordDecoder, TraceRecord
from opentelemetry_exporter_userevents.reader.live.announced_tracepoints import (
    announced_tracepoints,
    highest_multi_id,
)
from opentelemetry_exporter_userevents.reader.live.announcement_thread import AnnouncementThread
from opentelemetry_exporter_userevents.reader.live.announcements import (
    Announced,
    AnnouncementListener,
)
from opentelemetry_exporter_userevents.reader.live.cpu_pipes import CpuPipes
from opentelemetry_exporter_userevents.reader.live.eventheader_providers import (
    LateProvider,
    ProviderDiscovery,
)
from opentelemetry_exporter_userevents.reader.live.new_tracepoint_signal import (
    NewTracepointSignal,
)
from opentelemetry_exporter_userevents.reader.live.our_tracepoints import our_tracepoints
from opentelemetry_exporter_userevents.reader.live.read_wakeup import WAKE_PERCENT, ReadWakeup
from opentelemetry_exporter_userevents.reader.live.rescan_schedule import RescanSchedule
from opentelemetry_exporter_userevents.reader.live.tracefs_instance import (
    InstanceOwner,
    TracefsInstance,
)
from opentelemetry_exporter_userevents.reader.live.tracepoint_holder import TracepointHolder
from opentelemetry_exporter_userevents.record.tracepoints import (
    ANY_PREFIX,
    RESOURCE_KIND,
    SPAN_KIND,
    parse_tracepoint,
)

INSTANCE_PREFIX = "otel-userevents."
MAX_FOUND_LATER = 1024
"""Prefixes first found after the start that are remembered (the rest are counted)."""
_PAGES_PER_READ = 1024
"""Pages read from one CPU per :meth:`TraceReader.read`, so one busy CPU cannot starve
the others or the rescan."""
ID_RECHECK_INTERVAL = 10.0
"""Seconds between rescans that read the ids of the tracepoints already enabled (an ``id``
file opened for each was most of a rescan's cost). Enabled in our instance, one cannot be
deleted (EBUSY: docs/kernels.rst), so it keeps its id, unless something disables it here."""


ReaderError = TracefsError
"""The reader cannot run here; the message says why and what to do."""


@dataclass
class _Enabled:
    system: str
    name: str
    kind: str
    event_id: int
    format_text: str


@dataclass
class LateService:
    """A prefix whose first records a machine-wide reader may have missed."""

    prefix: str
    found: float | None
    """Seconds after the start when a scan first enabled one of its tracepoints; None if
    none was (its tracepoints were gone when the reader looked)."""
    why: str
    """``not announced`` (an app of an older release, or announcements turned off), or
    ``gave up waiting after N ms`` (the reader was too slow: stalled or busy)."""


class TraceReader(InstanceOwner):
    """Reads our records from a private tracefs instance. Use as a context manager."""

    def __init__(
        self,
        tracefs: Tracefs | None = None,
        prefix: str | Sequence[str] = "otel",
        filter: str | None = None,  # noqa: A002 - the tracefs file's name
        buffer_size_kb: int | None = None,
        rescan_interval: float = 0.5,
        hold: bool = True,
        providers: Sequence[str] = (),
    ) -> None:
        """``prefix``: the exporters' prefix, or several; ``*`` records every prefix whose
        tracepoints match our schemas (found by rescans). ``hold``: register the named
        prefixes' tracepoints at start (:mod:`.tracepoint_holder`), so an app's records are
        seen from its first one. ``providers``: EventHeader providers to read too (``*``:
        every one, found by rescans); a named one's ``_L1K1`` to ``_L5K1`` are held."""
        self.tracefs = tracefs or find_tracefs()
        self.prefixes = (prefix,) if isinstance(prefix, str) else tuple(prefix)
        self.prefix = self.prefixes[0]
        self.hold = hold
        self.holder: TracepointHolder | None = None
        self.filter = filter
        self.buffer_size_kb = buffer_size_kb
        self.rescan_interval = rescan_interval
        self.tracefs_instance = TracefsInstance(self.tracefs, INSTANCE_PREFIX)
        self.instance = self.tracefs_instance.name
        self.trace_clock: str | None = None
        """The instance's trace clock, set before anything is enabled (``record --capture
        --kernel``: ``tai``, as the kernel view's instance, so one file has one clock);
        None: the kernel's default, ``local``."""
        self.decoder = RecordDecoder(self.prefixes, providers=providers)
        self.providers = ProviderDiscovery(self.decoder.providers.named)
        """When each EventHeader provider was found (:meth:`late_providers`)."""
        self.filter_rejected: dict[str, str] = {}
        """Tracepoints the kernel would not take the filter for (not enabled): reasons."""
        self.incompatible: dict[str, str] = {}
        """Tracepoints with our names but not our schema (not enabled): reasons."""
        self._enabled: dict[tuple[str, str], _Enabled] = {}
        self._format_log: list[str] = []
        """The format text of each tracepoint enabled, in the order enabled (it only
        grows: :meth:`known_formats`)."""
        self._format_snapshot: tuple[str, ...] = ()
        """:attr:`_format_log` as of its last change: a read copies nothing."""
        self.pipes = CpuPipes(self.tracefs, self.instance, _PAGES_PER_READ)
        self.rescans = RescanSchedule(rescan_interval, None)
        """When a rescan lists every user_events name (:mod:`.rescan_schedule`); its change
        signal is registered at :meth:`start`."""
        self.announcements: AnnouncementListener | None = None
        """Under ``*`` (with ``hold``): the announcements of new services
        (:mod:`.announcements`), answered by :attr:`answers`."""
        self.answers: AnnouncementThread | None = None
        """The thread that answers announcements and rescans (:mod:`.announcement_thread`);
        if it stops on an error, :meth:`read` does both, as without it."""
        self._lock = threading.Lock()
        """Held by a scan while it enables (not while it lists or looks names up) and by a
        read of announcements; never across the main loop's decoding, joining or output."""
        self._next_id_check = 0.0
        """When a rescan next reads the ids of the tracepoints it knows (ID_RECHECK_INTERVAL)."""
        self._probe_from = 0
        """The multi-format id after the highest the last full rescan saw, or the change
        signal's next one if later (:mod:`.announced_tracepoints`)."""
        self.announcement_error: str | None = None
        """Why announcements cannot be heard here, if they cannot."""
        self._started = 0.0
        self._wakeup: ReadWakeup | None = None
        """Made at the first :meth:`wait` (once the buffers are open)."""
        self._prefixes_at_start: set[str] | None = None
        self._found_later: dict[str, tuple[float, Announced | None]] = {}
        """Prefix -> (seconds after the start, its announcement as known then)."""
        self.found_later_not_remembered = 0
        self.on_announced: Callable[[set[int]], None] | None = None
        """Called with the writer pids of new announcements before their tracepoints are
        enabled (``record --kernel`` lists their processes, so it sees their first span
        whole: an announcing exporter waits until it is listened to)."""

    # --- lifetime -------------------------------------------------------------------

    def start(self) -> TraceReader:
        """Check rights, remove stale instances, create ours, enable our tracepoints."""
        self.tracefs_instance.create()
        try:
            if self.trace_clock is not None:
                self.tracefs.set_trace_clock(self.instance, self.trace_clock)
            if self.buffer_size_kb:
                self.tracefs.set_buffer_size_kb(self.instance, self.buffer_size_kb)
            self.tracefs.set_buffer_percent(self.instance, WAKE_PERCENT)
            self.decoder.layout = PageLayout.from_header_page(
                self.tracefs.header_page(), self.tracefs.sub_buffer_size(self.instance)
            )
            if self.hold:
                self.holder = TracepointHolder(self.tracefs)
                self.holder.hold(p for p in self.prefixes if p != ANY_PREFIX)
                self.holder.hold_providers(self.decoder.providers.named)
                if self.decoder.providers.metrics:
                    self.holder.hold_otlp_metrics()
                if ANY_PREFIX in self.prefixes:
                    self._listen_to_announcements(self.holder)
            self.pipes.open()
            self._started = time.monotonic()
            self.rescans.signal = NewTracepointSignal(self.tracefs)
            self.rescans.due(self._started)  # the first is due: its probe, then the listing
            self.scan()
            if self.announcements is not None and self.announcements.listening:
                self.answers = AnnouncementThread(
                    self.announcements,
                    self._lock,
                    self._announced,
                    self.scan,
                    self.rescan_if_due,
                    self.rescan_interval,
                )
                self.answers.start()
        except BaseException:
            self.close()
            raise
        return self

    def _listen_to_announcements(self, holder: TracepointHolder) -> None:
        holder.hold_announcements()
        listener = AnnouncementListener(self.tracefs, self.decoder.layout)
        try:
            listener.start()
        except OSError as error:
            listener.close()
            self.announcement_error = f"announcements cannot be heard: {error}"
            return
        self.announcements = listener
        if not listener.listening:
            self.announcement_error = "announcements cannot be heard: " + (
                "; ".join(f"{k}: {v}" for k, v in listener.problems.items())
                or "no announcement tracepoint"
            )

    def close(self) -> None:
        """Disable our tracepoints, remove the instances, and let go of the tracepoints the
        reader held. Idempotent."""
        if self.answers is not None:
            self.answers.stop()
        if self.rescans.signal is not None:
            self.rescans.signal.close()
        self.pipes.close()
        self.tracefs_instance.close()
        if self.announcements is not None:
            self.announcements.close()
        if self.holder is not None:
            self.holder.close()

    def __enter__(self) -> TraceReader:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- discovery ------------------------------------------------------------------

    def scan(self, only: Collection[str] | None = None) -> list[str]:
        """Enable tracepoints that appeared since the last scan (resource ones first, span
        ones last: an app that waits until its spans are listened to finds the rest listened
        too); return their names. ``only``: of these prefixes only, looked up by name
        (:mod:`.announced_tracepoints`; just announced: their writers wait, and a whole
        rescan lists every user_events name on the machine, which :meth:`rescan_if_due`
        does only as often as :mod:`.rescan_schedule` allows)."""
        probe_from = self._probe_from
        if only is None:
            started = time.monotonic()
            listing = {
                s: self.tracefs.events(s) for s in (USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM)
            }
            found = our_tracepoints(self.tracefs, self.decoder, listing=listing)
            probe_from = max(probe_from, highest_multi_id(listing[USER_EVENTS_MULTI_SYSTEM]) + 1)
            self.rescans.listed(started, time.monotonic(), listing[USER_EVENTS_MULTI_SYSTEM])
        else:
            found = announced_tracepoints(self.tracefs, self.decoder, only, probe_from)
        found.sort(key=lambda item: (item[2] != RESOURCE_KIND, item[2] == SPAN_KIND))
        added = []
        now = time.monotonic()
        recheck = only is None and now >= self._next_id_check
        if recheck:
            self._next_id_check = now + ID_RECHECK_INTERVAL
        with self._lock:
            for system, name, kind in found:
                known_event = self._enabled.get((system, name))
                if known_event is not None and not recheck:
                    continue  # enabled here, so the kernel cannot delete it (ID_RECHECK_INTERVAL)
                try:
                    event_id = self.tracefs.event_id(system, name)
                except (OSError, ValueError):
                    continue  # deleted meanwhile
                if known_event is not None and known_event.event_id == event_id:
                    continue
                if self._enable(system, name, kind):
                    added.append(name)
            self._note_found(added)
            self._probe_from = probe_from
        return added

    def rescan_if_due(self) -> bool:
        """A full :meth:`scan` if the schedule says one is due (:mod:`.rescan_schedule`:
        a bounded share of the time, whatever the number of names); whether it ran."""
        if not self.rescans.due(time.monotonic()):
            self._follow_multi_format_ids()
            return False
        self.scan()
        return True

    def _follow_multi_format_ids(self) -> None:
        """Move the announced look-ups' first id to the signal's next one: between full
        listings the counter moves on (the probes alone take two ids a second), and a
        look-up tries only :data:`.MULTI_PROBE_IDS` ids from there."""
        signal = self.rescans.signal
        next_id = signal.next_id if signal is not None else None
        if next_id is not None and next_id > self._probe_from:
            with self._lock:
                self._probe_from = max(self._probe_from, next_id)

    def _announced(self, pids: set[int]) -> None:
        if self.on_announced is not None:
            self.on_announced(pids)

    def _note_found(self, added: list[str]) -> None:
        """Remember when each prefix was first found, after the start (under ``*``), and
        each EventHeader provider."""
        if self.decoder.providers.every:
            self.providers.note(added, time.monotonic() - self._started)
        if ANY_PREFIX not in self.prefixes:
            return
        prefixes = {parsed.prefix for name in added if (parsed := parse_tracepoint(name))}
        if self._prefixes_at_start is None:
            self._prefixes_at_start = prefixes
            return
        now = time.monotonic() - self._started
        announced = self.announcements.announced if self.announcements is not None else {}
        for prefix in prefixes - self._prefixes_at_start:
            if prefix in self._found_later:
                continue
            if len(self._found_later) >= MAX_FOUND_LATER:
                self.found_later_not_remembered += 1
                continue
            self._found_later[prefix] = (now, announced.get(prefix))

    def late_services(self) -> list[LateService]:
        """Prefixes that appeared after the start and whose first records may not have been
        recorded: found by a rescan without an announcement, or announced by a writer that
        gave up waiting. Neither the kernel nor the writer counts what nobody listened to."""
        if ANY_PREFIX not in self.prefixes or self._prefixes_at_start is None:
            return []
        with self._lock:
            announced = dict(self.announcements.announced) if self.announcements else {}
            found_later = dict(self._found_later)
        late = []
        for prefix, (found, heard_then) in found_later.items():
            heard = announced.get(prefix) or heard_then  # heard after, or forgotten since
            if heard is None:
                late.append(LateService(prefix, found, "not announced"))
            elif heard.gave_up is not None:
                late.append(LateService(prefix, found, f"gave up waiting after {heard.wait_ms} ms"))
        for prefix, heard in announced.items():
            if prefix not in found_later and prefix not in self._prefixes_at_start:
                if heard.gave_up is not None:
                    why = f"gave up waiting after {heard.wait_ms} ms"
                    late.append(LateService(prefix, None, why))
        return late

    def late_providers(self) -> list[LateProvider]:
        """EventHeader providers found by a rescan after the start (``--provider '*'``):
        they announce nothing, so what they wrote before was seen by nobody."""
        with self._lock:
            return self.providers.late()

    def wait(self, timeout: float) -> bool:
        """Rest up to ``timeout`` seconds between reads; whether there is something to read
        sooner (:mod:`.read_wakeup`: a CPU's buffer at its watermark, or, without the thread
        that answers announcements, a new service's announcement, whose tracepoints the next
        :meth:`read` enables)."""
        if self._wakeup is None:
            listener = self.announcements
            self._wakeup = ReadWakeup(self.pipes, listener.pipes if listener else None)
        return self._wakeup.wait(timeout, announcements=not self._answering())

    def discover(self) -> None:
        """Enable the tracepoints of services that announced themselves, and rescan when
        the schedule says (the threads that answer announcements and rescan do both while
        they run)."""
        if self._answering():
            return
        heard = self.announcements.read() if self.announcements is not None else set()
        if heard and self.on_announced is not None and self.announcements is not None:
            self.on_announced(self.announcements.heard_pids)
        if not self.rescan_if_due() and heard:
            self.scan(heard)

    def _answering(self) -> bool:
        return self.answers is not None and self.answers.running

    def _enable(self, system: str, name: str, kind: str) -> bool:
        if name in self.incompatible or name in self.filter_rejected:
            return False
        try:
            text = self.tracefs.format_text(system, name)
            fmt = parse_format(text)
            self.decoder.add(fmt)
        except OSError:
            return False
        except ValueError as error:
            self.incompatible[name] = str(error)
            return False
        if self.filter and kind != RESOURCE_KIND:
            try:
                self.tracefs.set_filter(system, name, self.filter, self.instance)
            except ValueError as error:
                self.filter_rejected[name] = str(error)
                return False
            except OSError:
                return False
        try:
            self.tracefs_instance.enable(system, name)
        except OSError:
            return False
        self._enabled[(system, name)] = _Enabled(system, name, kind, fmt.id, text)
        self._format_log.append(text)
        self._format_snapshot = tuple(self._format_log)
        return True

    @property
    def lost(self) -> int:
        """Records the kernel lost (overwritten or dropped), from the per-CPU ``stats``."""
        return self.pipes.lost

    @property
    def first_loss(self) -> float | None:
        """When (``time.monotonic()``) a read first found that records had been lost."""
        return self.pipes.first_loss

    @property
    def last_loss(self) -> float | None:
        """When a read last found a loss: the reader fell behind its writers between the
        first and the last, and the reads before them."""
        return self.pipes.last_loss

    @property
    def tracepoints(self) -> dict[str, str]:
        """Enabled tracepoints (``system/name``) and their kind."""
        with self._lock:
            return {f"{t.system}/{t.name}": t.kind for t in self._enabled.values()}

    # --- reading --------------------------------------------------------------------

    def read(self) -> list[TraceRecord]:
        """Every record available now, from all CPUs, merged by timestamp; never blocks.
        Rescans for new tracepoints after reading (so records already in the buffer are
        decoded with the format they were written with)."""
        records: list[TraceRecord] = []
        for page in self.read_pages():
            self.decoder.decode_page(page, records)
        records.sort(key=lambda record: record.timestamp)
        self.discover()
        return records

    def read_pages(self) -> list[bytes]:
        """The raw sub-buffers available now, CPU by CPU; updates :attr:`lost`."""
        return [page for _, page in self.read_cpu_pages()]

    def read_cpu_pages(self) -> list[tuple[int, bytes]]:
        """(cpu, sub-buffer) for every page available now, CPU by CPU (for :meth:`read`,
        and to capture pages for offline decoding); updates :attr:`lost`."""
        return self.pipes.read(self.decoder.layout.page_size)

    def capture(self) -> list[tuple[int, bytes]]:
        """Like :meth:`read_cpu_pages`, and rescan when due (``record --capture``: pages are
        kept, not decoded, so the reader keeps up with bursts)."""
        pages = self.read_cpu_pages()
        self.discover()
        return pages

    def known_formats(self) -> tuple[str, ...]:
        """The format text of every tracepoint enabled so far, in the order enabled. Taken
        after pages are read, it holds the format of each of their records: a scan adds a
        format before it enables the tracepoint, and holds the lock taken here while it
        does (the decoding workers get these with the pages: :class:`.PageBatch`)."""
        with self._lock:
            return self._format_snapshot

    def formats(self) -> list[tuple[str, str]]:
        """(system, ``format`` file text) of every tracepoint enabled so far, as it was when
        enabled (to decode captured pages, even after the tracepoint is gone)."""
        with self._lock:
            return [(t.system, t.format_text) for t in self._enabled.values()]
