package dev.albertedge.core;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One row of an {@code albert-edge-bench/1} report: one artifact, on one backend, at one
 * shape. Every key of the schema is always written ({@code null} where not measured), as
 * the harness's {@code albert_edge/bench/schema.py} requires; see
 * {@code benchmarks/README.md} for what each field means.
 */
public final class BenchmarkResult {
    public static final String OK = "ok";
    public static final String SKIPPED = "skipped";
    public static final String FAILED = "failed";

    public String artifact = "model.tflite";
    public String format = "tflite";
    public String precision = "int8-dynamic";
    public String backend = "";
    public String device = "cpu";
    public int batch = 1;
    public int seqLen;
    public int threads = 1;
    public Long fileBytes;
    public Long floorBytes;
    public Double loadMs;
    public Double firstInferenceMs;
    public LatencyStats latency;
    public Double throughputSeqPerS;
    public Long peakRssBytes;
    public String status = SKIPPED;
    public String reason;
    /** Keys beyond the schema's (the harness allows extras, e.g. {@code tool}). */
    public final Map<String, Object> extra = new LinkedHashMap<>();

    public BenchmarkResult copy() {
        BenchmarkResult r = new BenchmarkResult();
        r.artifact = artifact;
        r.format = format;
        r.precision = precision;
        r.backend = backend;
        r.device = device;
        r.batch = batch;
        r.seqLen = seqLen;
        r.threads = threads;
        r.fileBytes = fileBytes;
        r.floorBytes = floorBytes;
        r.loadMs = loadMs;
        r.firstInferenceMs = firstInferenceMs;
        r.latency = latency;
        r.throughputSeqPerS = throughputSeqPerS;
        r.peakRssBytes = peakRssBytes;
        r.status = status;
        r.reason = reason;
        r.extra.putAll(extra);
        return r;
    }

    /** The result as the schema's JSON object (key order as in the harness). */
    public Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("artifact", artifact);
        m.put("format", format);
        m.put("precision", precision);
        m.put("backend", backend);
        m.put("device", device);
        m.put("batch", batch);
        m.put("seq_len", seqLen);
        m.put("threads", threads);
        m.put("file_bytes", fileBytes);
        m.put("floor_bytes", floorBytes);
        Double ratio = null;
        if (fileBytes != null && floorBytes != null && floorBytes > 0) {
            ratio = fileBytes.doubleValue() / floorBytes.doubleValue();
        }
        m.put("ratio_to_floor", ratio);
        m.put("load_ms", loadMs);
        m.put("first_inference_ms", firstInferenceMs);
        m.put("latency_ms", latency != null ? latency.toMap() : null);
        m.put("throughput_seq_per_s", throughputSeqPerS);
        m.put("peak_rss_bytes", peakRssBytes);
        m.put("gops", null);
        m.put("roofline_fraction", null);
        m.put("status", status);
        m.put("reason", reason);
        for (Map.Entry<String, Object> e : extra.entrySet()) {
            if (!m.containsKey(e.getKey())) {
                m.put(e.getKey(), e.getValue());
            }
        }
        return m;
    }
}
