package dev.albertedge.core;

import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TimeZone;

/**
 * A whole {@code albert-edge-bench/1} report: {@code schema}, {@code created},
 * {@code machine}, {@code settings}, {@code roofline} and {@code results}, the shape the
 * Python harness writes and validates ({@code albert_edge/bench/schema.py}), so a phone's
 * numbers can be rendered next to the desktop ones.
 */
public final class BenchmarkReport {
    public static final String SCHEMA = "albert-edge-bench/1";

    private final Map<String, Object> machine = new LinkedHashMap<>();
    private final Map<String, Object> settings = new LinkedHashMap<>();
    private final List<BenchmarkResult> results = new ArrayList<>();
    private Date created = new Date();

    /**
     * {@code machine} must carry at least {@code cpu}, {@code os}, {@code python} (null on a
     * phone) and {@code versions} (a map of runtime versions); see {@link #machine(String,
     * String, Map)}.
     */
    public Map<String, Object> machine() {
        return machine;
    }

    /** Fills the machine keys the schema requires. */
    public BenchmarkReport machine(String cpu, String os, Map<String, String> versions) {
        machine.put("cpu", cpu);
        machine.put("os", os);
        machine.put("python", null);
        machine.put("versions", new LinkedHashMap<String, Object>(versions));
        return this;
    }

    public Map<String, Object> settings() {
        return settings;
    }

    public List<BenchmarkResult> results() {
        return results;
    }

    public BenchmarkReport add(BenchmarkResult r) {
        results.add(r);
        return this;
    }

    public BenchmarkReport created(Date when) {
        created = when;
        return this;
    }

    public Map<String, Object> toMap() {
        SimpleDateFormat iso = new SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss'Z'", Locale.ROOT);
        iso.setTimeZone(TimeZone.getTimeZone("UTC"));
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("schema", SCHEMA);
        m.put("created", iso.format(created));
        m.put("machine", machine);
        m.put("settings", settings);
        m.put("roofline", new LinkedHashMap<String, Object>());
        List<Object> rows = new ArrayList<>();
        for (BenchmarkResult r : results) {
            rows.add(r.toMap());
        }
        m.put("results", rows);
        return m;
    }

    public String toJson() {
        return Json.write(toMap()) + "\n";
    }
}
