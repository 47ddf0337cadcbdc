package dev.albertedge.core;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Summary of timed runs in milliseconds, the harness's {@code latency_ms} object as
 * {@code albert_edge/bench/worker.py}'s {@code summarize} computes it: p50/p90/p99 (numpy's
 * default "linear" percentile), mean, sample standard deviation (ddof=1; 0 for one run),
 * min, max and the number of runs.
 */
public final class LatencyStats {
    public final double p50;
    public final double p90;
    public final double p99;
    public final double mean;
    public final double std;
    public final double min;
    public final double max;
    public final int runs;

    private LatencyStats(
            double p50, double p90, double p99, double mean, double std, double min, double max,
            int runs) {
        this.p50 = p50;
        this.p90 = p90;
        this.p99 = p99;
        this.mean = mean;
        this.std = std;
        this.min = min;
        this.max = max;
        this.runs = runs;
    }

    public static LatencyStats of(double[] millis) {
        if (millis.length == 0) {
            throw new IllegalArgumentException("no timed runs");
        }
        double[] sorted = millis.clone();
        Arrays.sort(sorted);
        double sum = 0.0;
        for (double x : sorted) {
            sum += x;
        }
        double mean = sum / sorted.length;
        double sq = 0.0;
        for (double x : sorted) {
            sq += (x - mean) * (x - mean);
        }
        double std = sorted.length > 1 ? Math.sqrt(sq / (sorted.length - 1)) : 0.0;
        return new LatencyStats(
                percentile(sorted, 50), percentile(sorted, 90), percentile(sorted, 99),
                mean, std, sorted[0], sorted[sorted.length - 1], sorted.length);
    }

    /**
     * numpy.percentile(..., method="linear") on sorted data: virtual index q·(n−1), then
     * numpy's lerp (from the upper neighbour when the fraction is ≥ 0.5).
     */
    public static double percentile(double[] sorted, double q) {
        int n = sorted.length;
        double quantile = q / 100.0;
        double virtual = n * quantile + (1.0 - quantile) - 1.0;
        virtual = Math.max(0.0, Math.min(n - 1, virtual));
        int lo = (int) Math.floor(virtual);
        int hi = Math.min(lo + 1, n - 1);
        double t = virtual - lo;
        double a = sorted[lo];
        double b = sorted[hi];
        double diff = b - a;
        return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
    }

    public Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("p50", p50);
        m.put("p90", p90);
        m.put("p99", p99);
        m.put("mean", mean);
        m.put("std", std);
        m.put("min", min);
        m.put("max", max);
        m.put("runs", runs);
        return m;
    }
}
