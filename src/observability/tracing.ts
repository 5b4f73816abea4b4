import { context, propagation, trace, SpanKind, SpanStatusCode, type Attributes, type Span } from '@opentelemetry/api';
import type { BasicTracerProvider, SpanProcessor } from '@opentelemetry/sdk-trace-base';

/**
 * OpenTelemetry tracing (docs/operations.md "Tracing"), off unless TRACING=otlp. While off, every helper here
 * returns at its first line: no span objects, no context propagation, no `tp` field in the outbox.
 *
 * A call's trace: the HTTP request's server span → the Lua change (`redis <script>`) → the
 * change's W3C `traceparent`, stored with its outbox entry → the relay's span for that change (in
 * whichever worker relays it) → one span per push send, also across retries (the push message
 * carries the trace context into its retry job).
 */

let enabled = false;
let provider: BasicTracerProvider | undefined;

export function tracingEnabled(): boolean {
  return enabled;
}

/**
 * Installs the SDK for this process: OTLP over HTTP (the exporter reads the standard
 * OTEL_EXPORTER_OTLP_* variables) or, in tests, the given span processor. The SDK is loaded here,
 * not at startup: its 200-odd modules took about 125 ms of every process start, tracing or not.
 */
export async function startTracing(serviceName: string, processor?: SpanProcessor): Promise<void> {
  if (enabled) return;
  const [{ AsyncLocalStorageContextManager }, { W3CTraceContextPropagator }, { OTLPTraceExporter }, { resourceFromAttributes }, { BasicTracerProvider, BatchSpanProcessor }, { ATTR_SERVICE_NAME }] =
    await Promise.all([
      import('@opentelemetry/context-async-hooks'),
      import('@opentelemetry/core'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/semantic-conventions'),
    ]);
  // Another call may have installed it while the modules loaded.
  if (enabled) return;
  provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }),
    spanProcessors: [processor ?? new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  enabled = true;
}

/** Sends what is still buffered (graceful shutdown). */
export async function flushTracing(): Promise<void> {
  await provider?.forceFlush();
}

const tracer = () => trace.getTracer('calling-backend');

/** The W3C `traceparent` of the active span, to carry it across a process boundary. */
export function currentTraceparent(): string | undefined {
  if (!enabled) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent as a W3C `traceparent` (from a request header or an outbox entry); else the active span. */
  parent?: string | undefined;
  /** Whether a thrown error marks the span as failed (default: every error). */
  errorIf?: (err: unknown) => boolean;
}

/** Runs `fn` in a new active span; its failure marks the span as an error. */
export async function inSpan<T>(name: string, opts: SpanOptions, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!enabled) return fn(undefined);
  const parent = opts.parent ? propagation.extract(context.active(), { traceparent: opts.parent }) : context.active();
  return tracer().startActiveSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes ?? {} }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      if (opts.errorIf?.(err) ?? true) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      }
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Starts a span that the caller ends (for work that outlives one function call), with its traceparent. */
export function openSpan(name: string, opts: SpanOptions): { span: Span; traceparent: string } | undefined {
  if (!enabled) return undefined;
  const parent = opts.parent ? propagation.extract(context.active(), { traceparent: opts.parent }) : context.active();
  const span = tracer().startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes ?? {} }, parent);
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(parent, span), carrier);
  return { span, traceparent: carrier.traceparent ?? '' };
}

export { SpanKind, SpanStatusCode };
