package dev.albertedge.core;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.util.Map;
import org.junit.Test;

/** Latency statistics, bucket choice, the runner's bookkeeping and the JSON writer. */
public class BenchmarkTest {
    @Test
    public void statsFollowNumpy() {
        LatencyStats s = LatencyStats.of(new double[] {4, 1, 3, 2});
        assertEquals(2.5, s.p50, 1e-12);
        assertEquals(3.7, s.p90, 1e-12);
        assertEquals(3.97, s.p99, 1e-12);
        assertEquals(2.5, s.mean, 1e-12);
        assertEquals(Math.sqrt(5.0 / 3.0), s.std, 1e-12);
        assertEquals(1, s.min, 0);
        assertEquals(4, s.max, 0);
        assertEquals(4, s.runs);
        LatencyStats one = LatencyStats.of(new double[] {7});
        assertEquals(7, one.p99, 0);
        assertEquals(0, one.std, 0);
    }

    @Test
    public void bucketsComeFromSignatureKeys() {
        assertArrayEquals(new int[] {32, 64, 128}, SequenceBuckets.fromSignatureKeys(
                new String[] {"serving_default", "seq_128", "seq_32", "seq_64", "seq_x"}));
        assertEquals(32, SequenceBuckets.pick(new int[] {128, 32, 64}, 1));
        assertEquals(64, SequenceBuckets.pick(new int[] {128, 32, 64}, 33));
        assertEquals(128, SequenceBuckets.pick(new int[] {128, 32, 64}, 500));
        assertEquals("seq_64", SequenceBuckets.signatureKey(64));
    }

    private static final class CountingSession implements BenchmarkRunner.Session {
        int runs;
        boolean closed;
        final int failAt;

        CountingSession(int failAt) {
            this.failAt = failAt;
        }

        @Override
        public void run(int index) {
            if (index != runs) {
                throw new IllegalStateException("inputs out of order");
            }
            if (runs++ == failAt) {
                throw new IllegalStateException("boom\nsecond line");
            }
        }

        @Override
        public void close() {
            closed = true;
        }
    }

    @Test
    public void runnerTimesFirstWarmupAndRuns() {
        BenchmarkResult t = new BenchmarkResult();
        t.backend = "litert-cpu";
        t.seqLen = 32;
        CountingSession s = new CountingSession(-1);
        BenchmarkResult r = BenchmarkRunner.measure(t, () -> s, 3, 10);
        assertEquals(BenchmarkResult.OK, r.status);
        assertEquals(1 + 3 + 10, s.runs);
        assertTrue(s.closed);
        assertEquals(10, r.latency.runs);
        assertTrue(r.loadMs >= 0 && r.firstInferenceMs >= 0);
        assertTrue(r.throughputSeqPerS == null || r.throughputSeqPerS > 0);
        assertNull(r.reason);
        assertEquals("", t.reason == null ? "" : t.reason); // the template is untouched
        assertEquals(BenchmarkResult.SKIPPED, t.status);
    }

    @Test
    public void unsupportedIsSkippedAndErrorsAreFailedWithOneLine() {
        BenchmarkResult t = new BenchmarkResult();
        BenchmarkResult r = BenchmarkRunner.measure(t, () -> {
            throw new BenchmarkRunner.Unsupported("GPU delegate not supported on this device");
        }, 1, 5);
        assertEquals(BenchmarkResult.SKIPPED, r.status);
        assertEquals("GPU delegate not supported on this device", r.reason);
        CountingSession s = new CountingSession(2);
        r = BenchmarkRunner.measure(t, () -> s, 1, 5);
        assertEquals(BenchmarkResult.FAILED, r.status);
        assertEquals("run: IllegalStateException: boom", r.reason);
        assertTrue(s.closed);
        assertNull(r.latency);
        r = BenchmarkRunner.measure(t, () -> {
            throw new java.io.IOException("model.tflite missing");
        }, 1, 5);
        assertEquals("load: IOException: model.tflite missing", r.reason);
    }

    @Test
    public void resultsCarryEverySchemaKey() {
        Map<String, Object> m = new BenchmarkResult().toMap();
        String[] keys = {"artifact", "format", "precision", "backend", "device", "batch", "seq_len",
            "threads", "file_bytes", "floor_bytes", "ratio_to_floor", "load_ms",
            "first_inference_ms", "latency_ms", "throughput_seq_per_s", "peak_rss_bytes", "gops",
            "roofline_fraction", "status", "reason"};
        assertEquals(java.util.Arrays.asList(keys), new java.util.ArrayList<>(m.keySet()));
        BenchmarkResult r = new BenchmarkResult();
        r.extra.put("tool", "android_demo");
        r.extra.put("status", "not allowed to override");
        BenchmarkResult copy = r.copy();
        Map<String, Object> cm = copy.toMap();
        assertEquals("android_demo", cm.get("tool"));
        assertEquals(BenchmarkResult.SKIPPED, cm.get("status"));
        r.fileBytes = 300L;
        r.floorBytes = 200L;
        assertEquals(1.5, (Double) r.toMap().get("ratio_to_floor"), 0);
    }

    @Test
    public void jsonEscapesAndWritesNullForNonFinite() {
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        m.put("s", "q\"\\\n\t\u0001é");
        m.put("n", Double.NaN);
        m.put("i", 3L);
        m.put("d", 0.5);
        m.put("l", java.util.Arrays.asList(1, null, true));
        assertEquals("{\"s\":\"q\\\"\\\\\\n\\t\\u0001é\",\"n\":null,\"i\":3,\"d\":0.5,"
                + "\"l\":[1,null,true]}", Json.writeCompact(m));
        assertTrue(Json.write(m).contains("\n  \"i\": 3,"));
    }

    @Test
    public void peakRssIsReadOnLinux() {
        Long rss = MemoryProbe.peakRssBytes();
        if (new java.io.File("/proc/self/status").isFile()) {
            assertTrue(rss != null && rss > 1_000_000L);
        }
    }
}
