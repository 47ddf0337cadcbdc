package dev.albertedge.core;

/**
 * Times one backend at one shape: load, first inference, warm-up, then N timed runs, into a
 * {@link BenchmarkResult}. The runtime-specific part (LiteRT with a delegate, on Android)
 * is behind {@link Loader}, so the bookkeeping is the same code everywhere and is unit
 * tested on the JVM.
 *
 * <p>A loader that cannot run on this device throws {@link Unsupported}: the row is
 * recorded as {@code skipped} with the reason. Any other failure is recorded as
 * {@code failed} with a one-line reason. Either way the remaining rows still run.
 */
public final class BenchmarkRunner {
    private BenchmarkRunner() {}

    /** A loaded model ready to run; {@code run(i)} feeds input number {@code i}. */
    public interface Session extends AutoCloseable {
        void run(int index) throws Exception;

        @Override
        void close();
    }

    /** Creates a session (loads the model onto the backend). */
    public interface Loader {
        Session load() throws Exception;
    }

    /** The backend is not available on this device (e.g. no GPU delegate support). */
    public static final class Unsupported extends Exception {
        private static final long serialVersionUID = 1L;

        public Unsupported(String reason) {
            super(reason);
        }
    }

    public static BenchmarkResult measure(
            BenchmarkResult template, Loader loader, int warmup, int runs) {
        if (runs < 1 || warmup < 0) {
            throw new IllegalArgumentException("runs must be >= 1 and warmup >= 0");
        }
        BenchmarkResult r = template.copy();
        long t0 = System.nanoTime();
        Session session;
        try {
            session = loader.load();
        } catch (Unsupported e) {
            r.status = BenchmarkResult.SKIPPED;
            r.reason = oneLine(e.getMessage());
            return r;
        } catch (Exception | LinkageError e) {
            r.status = BenchmarkResult.FAILED;
            r.reason = "load: " + describe(e);
            return r;
        }
        try {
            r.loadMs = millisSince(t0);
            long t1 = System.nanoTime();
            session.run(0);
            r.firstInferenceMs = millisSince(t1);
            for (int i = 0; i < warmup; i++) {
                session.run(1 + i);
            }
            double[] ms = new double[runs];
            for (int i = 0; i < runs; i++) {
                long t = System.nanoTime();
                session.run(1 + warmup + i);
                ms[i] = millisSince(t);
            }
            r.latency = LatencyStats.of(ms);
            // As the harness: batch / p50 (a median is robust to the odd slow run).
            r.throughputSeqPerS = r.latency.p50 > 0 ? r.batch * 1000.0 / r.latency.p50 : null;
            r.peakRssBytes = MemoryProbe.peakRssBytes();
            r.status = BenchmarkResult.OK;
            r.reason = null;
        } catch (Exception | LinkageError e) {
            r.status = BenchmarkResult.FAILED;
            r.reason = "run: " + describe(e);
            r.latency = null;
            r.throughputSeqPerS = null;
        } finally {
            session.close();
        }
        return r;
    }

    private static double millisSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e6;
    }

    private static String describe(Throwable e) {
        String msg = e.getMessage();
        return oneLine(e.getClass().getSimpleName() + (msg != null ? ": " + msg : ""));
    }

    static String oneLine(String s) {
        if (s == null || s.trim().isEmpty()) {
            return "no reason given";
        }
        String line = s.trim().split("\\r?\\n", 2)[0];
        return line.length() > 300 ? line.substring(0, 300) + "…" : line;
    }
}
