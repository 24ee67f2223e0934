"""`GET /metrics`: moim's Prometheus metrics, with `prometheus_client`, one registry per app.

Counted as things happen (`Metrics`): HTTP requests by route and status and chat requests by
status (`proxy/request_metrics.py`, outside the app, so refusals and crashes count too); per
request with memory (`Metrics.observe`, from `proxy/pipeline.py`): moim's overhead, the tier,
what was injected, abstentions and memory errors. Read when scraped (`_StateCollector`): the
ingest queue, the writer's health, the vector index in RAM and the store's sizes. The
registry is the app's own, never prometheus_client's global one: tests build many apps in one
process.

Names (README, "Health and metrics", lists them with their meaning):

    moim_http_requests_total{route,method,status}   moim_chat_requests_total{status}
    moim_overhead_seconds{endpoint}                 moim_ttfb_seconds{endpoint}
    moim_recall_requests_total{tier}                moim_recall_abstentions_total
    moim_injected_tokens_total                      moim_injected_chunks_total
    moim_injected_facts_total                       moim_memory_errors_total{stage,kind}
    moim_ui_tasks_total{client}
    moim_ingest_pending  moim_ingest_queued  moim_ingest_queue_size  moim_ingest_queue_peak
    moim_ingest_spilled_total  moim_memory_write_failures_total  moim_index_pending_messages
    moim_writer_up  moim_writer_failures_total{part}  moim_writer_restarts_total
    moim_writer_oldest_unstored_seconds  moim_writer_unjournaled  moim_writer_dropped_total
    moim_vector_users_loaded  moim_vectors_loaded  moim_embedder_loaded
    moim_embedding_cpu_seconds_total{kind}          moim_embedding_texts_total{kind}
    moim_embedding_service_seconds_total{kind}      moim_embedding_service_texts_total{kind}
    moim_vector_rebuild_pending  moim_lexical_index_degraded  moim_ingest_failed
    moim_store_users  moim_store_messages  moim_store_chunks  moim_store_facts  moim_store_bytes
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Protocol

import anyio.to_thread
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from memory import MemoryLayer, MemoryLayerError
from proxy.writer import Writer

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# moim's own time is milliseconds (a recall: ~5-50 ms); a first byte waits for the model.
OVERHEAD_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# The label values known before any request: the histograms' endpoints, the recall tiers and
# the chat UIs whose background tasks are recognised (memory/ingest/ui_tasks.py's names).
ENDPOINTS = ("chat", "responses")
TIERS = ("0", "1", "2", "3")
UI_CLIENTS = ("open-webui", "librechat", "lobechat")
TTFB_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Observed(Protocol):
    """What `Metrics.observe` reads of a request (`proxy.exchange.Report` has it)."""

    overhead_ms: float
    tier: int
    chunks: int
    facts: int
    recalled: bool
    abstained: bool
    error_kind: str | None
    ui_task: str | None

    @property
    def tokens(self) -> int: ...


class Metrics:
    """The app's registry and the metrics moim counts as requests happen."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter(
            "moim_http_requests",
            "HTTP requests answered, by route (its template; (none): refused before routing, "
            "or no route), method and status (broke_off: the provider broke the body off).",
            ["route", "method", "status"],
            registry=registry,
        )
        self.chat_requests = Counter(
            "moim_chat_requests",
            "Chat and Responses API requests answered, by status (broke_off: the provider "
            "broke the streamed body off, and moim the client's).",
            ["status"],
            registry=registry,
        )
        self.overhead = Histogram(
            "moim_overhead_seconds",
            "moim's own time on a request with memory before it is forwarded "
            "(x-memory-overhead-ms): identify, measure, recall, inject.",
            ["endpoint"],
            buckets=OVERHEAD_BUCKETS,
            registry=registry,
        )
        self.ttfb = Histogram(
            "moim_ttfb_seconds",
            "Time from a chat request's arrival to the first byte of its answer's body, the "
            "provider's time included (answers below 400 only).",
            ["endpoint"],
            buckets=TTFB_BUCKETS,
            registry=registry,
        )
        self.recalls = Counter(
            "moim_recall_requests",
            "Requests that recalled memory, by the tier the fill ratio chose "
            "(0-2: up to 5, 3, 2 excerpts; 3: facts only).",
            ["tier"],
            registry=registry,
        )
        self.abstentions = Counter(
            "moim_recall_abstentions",
            "Recalls that found candidates but injected no excerpt, none being confident enough.",
            registry=registry,
        )
        self.tokens = Counter(
            "moim_injected_tokens", "Tokens of the memory blocks injected.", registry=registry
        )
        self.chunks = Counter(
            "moim_injected_chunks", "Excerpts injected in memory blocks.", registry=registry
        )
        self.facts = Counter(
            "moim_injected_facts", "Facts injected in memory blocks.", registry=registry
        )
        self.memory_errors = Counter(
            "moim_memory_errors",
            "Memory failures on the request path, by stage (recall: the request went on "
            "without memory; memory_api: a 503) and kind (the error, or embedder_loading). "
            "Write failures: moim_memory_write_failures_total.",
            ["stage", "kind"],
            registry=registry,
        )

        self.ui_tasks = Counter(
            "moim_ui_tasks",
            "Chat UIs' background task requests (a title, tags, follow-ups) passed through "
            "without memory, by the UI recognised (open-webui, librechat, lobechat).",
            ["client"],
            registry=registry,
        )

        # Every series whose labels are known up front is exported at 0 from the start: a
        # dashboard's rate() or an alert on `absent()` needs the series before its first event.
        for endpoint in ENDPOINTS:
            self.overhead.labels(endpoint)
            self.ttfb.labels(endpoint)
        for tier in TIERS:
            self.recalls.labels(tier)
        for client in UI_CLIENTS:
            self.ui_tasks.labels(client)

    def watch(self, writer: Writer, layer: MemoryLayer) -> None:
        """Read the writer, the vector index and the store at every scrape."""
        self.registry.register(_StateCollector(writer, layer))

    def observe(self, endpoint: str, report: Observed) -> None:
        """One request with memory, once answered: its overhead and what memory did."""
        self.overhead.labels(endpoint).observe(report.overhead_ms / 1000)
        if report.error_kind is not None:
            self.memory_errors.labels("recall", report.error_kind).inc()
        if report.ui_task is not None:
            self.ui_tasks.labels(report.ui_task).inc()
        if not report.recalled:
            return
        self.recalls.labels(str(report.tier)).inc()
        self.tokens.inc(report.tokens)
        self.chunks.inc(report.chunks)
        self.facts.inc(report.facts)
        if report.abstained:
            self.abstentions.inc()

    async def exposition(self) -> bytes:
        """The text format of every metric; the store is read in a worker thread."""
        return await anyio.to_thread.run_sync(generate_latest, self.registry)


class _StateCollector(Collector):
    """Gauges and counters read from the writer, the index and the store when scraped."""

    def __init__(self, writer: Writer, layer: MemoryLayer) -> None:
        self._writer = writer
        self._layer = layer

    def collect(self) -> Iterator[Metric]:
        yield from self._ingest()
        yield from self._writer_health()
        layer = self._layer
        yield _gauge(
            "moim_vector_users_loaded",
            "Users whose vectors are held in RAM.",
            layer.vector_users_loaded(),
        )
        yield _gauge(
            "moim_vectors_loaded",
            "Vectors held in RAM, over every loaded user.",
            layer.vectors_loaded(),
        )
        yield _gauge(
            "moim_embedder_loaded", "1 once the embedding model is loaded.", int(layer.ready)
        )
        yield from self._embedding(layer.embedding_work())
        yield from self._embedding_service(layer.embedding_service_work())
        yield from self._sizes()

    def _embedding(self, work: dict[str, tuple[float, int]]) -> Iterator[Metric]:
        """The embedding model's CPU and texts by kind: "query" on the request path,
        "document" in the writer (bench/load.py splits moim's CPU per request with them)."""
        seconds = CounterMetricFamily(
            "moim_embedding_cpu_seconds",
            "CPU seconds the embedding model used, by kind (query, document).",
            labels=["kind"],
        )
        texts = CounterMetricFamily(
            "moim_embedding_texts", "Texts the embedding model embedded, by kind.", labels=["kind"]
        )
        for kind, (cpu, count) in sorted(work.items()):
            seconds.add_metric([kind], cpu)
            texts.add_metric([kind], count)
        yield seconds
        yield texts

    def _ingest(self) -> Iterator[Metric]:
        writer = self._writer
        yield _gauge(
            "moim_ingest_pending", "Turns received but not yet stored and indexed.", writer.pending
        )
        yield _gauge(
            "moim_ingest_queued", "Turns waiting in the ingest queue (RAM).", writer.queued
        )
        yield _gauge(
            "moim_ingest_queue_size",
            "Capacity of the ingest queue (memory.ingest_queue_size).",
            writer.capacity,
        )
        yield _gauge(
            "moim_ingest_queue_peak",
            "The most turns the ingest queue has held at once.",
            writer.queue_peak,
        )
        yield _counter(
            "moim_ingest_spilled",
            "Turns written to the journal only, the queue being full.",
            writer.spilled,
        )

    def _writer_health(self) -> Iterator[Metric]:
        """sec-writer's health of the write path (proxy/writer.py, proxy/writer_health.py)."""
        writer = self._writer
        yield _counter(
            "moim_memory_write_failures",
            "Failed memory writes (journal, store, index).",
            writer.failures,
        )
        by_part = CounterMetricFamily(
            "moim_writer_failures",
            "Write path failures by part (journal, store, index, task, content).",
            labels=["part"],
        )
        for part, count in sorted(writer.failures_by_part().items()):
            by_part.add_metric([part], count)
        yield by_part
        yield _gauge(
            "moim_writer_up",
            "1 while the writer runs and nothing in the write path fails.",
            int(writer.up),
        )
        yield _counter(
            "moim_writer_restarts",
            "Times the writer's task crashed and was restarted.",
            writer.restarts,
        )
        yield _gauge(
            "moim_writer_oldest_unstored_seconds",
            "Age of the oldest turn not yet stored: the ingest lag.",
            writer.oldest_unstored_seconds,
        )
        yield _gauge(
            "moim_writer_unjournaled",
            "Queued turns held in RAM only (the journal failed).",
            writer.unjournaled,
        )
        yield _counter(
            "moim_writer_dropped",
            "Turns SQLite refused for their content (logged).",
            writer.dropped,
        )

    def _embedding_service(self, work: dict[str, tuple[float, int]]) -> Iterator[Metric]:
        """A remote embedder's wait (`memory.embedder`): seconds over texts of kind "query"
        is the mean query-embedding latency a request pays."""
        if not work:
            return
        seconds = CounterMetricFamily(
            "moim_embedding_service_seconds",
            "Seconds spent waiting on the embedding service, by kind (query, document).",
            labels=["kind"],
        )
        texts = CounterMetricFamily(
            "moim_embedding_service_texts",
            "Texts sent to the embedding service, by kind.",
            labels=["kind"],
        )
        for kind, (waited, count) in sorted(work.items()):
            seconds.add_metric([kind], waited)
            texts.add_metric([kind], count)
        yield seconds
        yield texts

    def _sizes(self) -> Iterator[Metric]:
        try:
            rebuild = self._layer.vector_rebuild()
            sizes = self._layer.sizes()
            lexical = self._layer.lexical_problem()
        except MemoryLayerError as exc:  # a locked store: the rest of the scrape still counts
            logger.warning("metrics: store sizes unavailable: %s", type(exc).__name__)
            return
        yield _gauge(
            "moim_vector_rebuild_pending",
            "Chunks still to re-embed after a change of embedding model (0: none).",
            rebuild.total - rebuild.done if rebuild is not None else 0,
        )
        yield _gauge(
            "moim_lexical_index_degraded",
            "1 while the lexical index failed under moim and is rebuilt; FTS5 answers.",
            int(lexical is not None),
        )
        yield _gauge("moim_store_users", "Users with stored messages.", sizes.users)
        yield _gauge("moim_store_messages", "Messages stored, every user.", sizes.messages)
        yield _gauge("moim_store_chunks", "Chunks indexed (full-text and vectors).", sizes.chunks)
        yield _gauge("moim_store_facts", "Active facts, every user.", sizes.facts)
        yield _gauge(
            "moim_index_pending_messages",
            "Messages stored but not yet chunked, embedded and indexed.",
            sizes.unindexed,
        )
        yield _gauge(
            "moim_ingest_failed",
            "Messages no indexing pass could index: stored, not indexed until moim reindex.",
            sizes.failed,
        )
        yield _gauge(
            "moim_store_bytes",
            "Bytes of the store: the SQLite file and its WAL, or the PostgreSQL database.",
            sizes.bytes,
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)
