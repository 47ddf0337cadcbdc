package dev.albertedge.core;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Checks the Java side against golden values the Python side wrote
 * ({@code tests/test_android_java.py} generates them from {@code albert_edge.tokenizer} on
 * every SST-2 dev sentence, and from its reference post-processing).
 *
 * <p>Usage: {@code GoldenParity <spiece.model> <golden.tsv>}. One record per line, fields
 * separated by tabs, texts base64 (UTF-8) so that any character survives:
 * <pre>
 * enc   text  pair|-  max_length  pad(0|1)  ids  types  mask      (ints comma-separated)
 * norm  segment  normalized
 * post  labels(b64, comma)  logits(float32 bits hex, comma)  index  probs(float32 bits hex)
 * bad   logits(float32 bits hex, comma)                        (must be rejected)
 * stats values(double bits hex, comma)  p50 p90 p99 mean std min max  (double bits hex)
 * </pre>
 * Prints the first mismatches and a summary line {@code checked=N mismatches=M}; exits 1 on
 * any mismatch, 2 on bad usage or an unreadable file.
 */
public final class GoldenParity {
    private static final int SHOW = 10;

    private final AlbertTokenizer tok;
    private final Map<String, int[]> counts = new LinkedHashMap<>();
    private final List<String> report = new ArrayList<>();
    private int mismatches;

    private GoldenParity(AlbertTokenizer tok) {
        this.tok = tok;
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: GoldenParity <spiece.model> <golden.tsv>");
            System.exit(2);
        }
        AlbertTokenizer tok;
        try {
            tok = AlbertTokenizer.load(new File(args[0]));
        } catch (TokenizerException e) {
            System.err.println(e.getMessage());
            System.exit(2);
            return;
        }
        GoldenParity g = new GoldenParity(tok);
        int lineNo = 0;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(
                new FileInputStream(args[1]), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                lineNo++;
                if (line.isEmpty() || line.startsWith("#")) {
                    continue;
                }
                g.check(line.split("\t", -1), lineNo);
            }
        }
        int total = 0;
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, int[]> e : g.counts.entrySet()) {
            total += e.getValue()[0];
            sb.append(' ').append(e.getKey()).append('=').append(e.getValue()[0])
                    .append('/').append(e.getValue()[1]);
        }
        for (String s : g.report) {
            System.out.println(s);
        }
        System.out.println("checked=" + total + " mismatches=" + g.mismatches + " (kind=checked/mismatched:"
                + sb + ")");
        System.exit(g.mismatches == 0 ? 0 : 1);
    }

    private void count(String kind, boolean ok, String detail) {
        int[] c = counts.get(kind);
        if (c == null) {
            c = new int[2];
            counts.put(kind, c);
        }
        c[0]++;
        if (!ok) {
            c[1]++;
            mismatches++;
            if (report.size() < SHOW) {
                report.add("MISMATCH " + kind + ": " + detail);
            }
        }
    }

    private void check(String[] f, int lineNo) {
        String kind = f[0];
        switch (kind) {
            case "enc":
                checkEncoding(f, lineNo);
                break;
            case "norm": {
                String seg = text(f[1]);
                String want = text(f[2]);
                String got = tok.normalize(seg);
                count(kind, got.equals(want), "line " + lineNo + " " + quote(seg) + " -> java "
                        + quote(got) + " python " + quote(want));
                break;
            }
            case "post":
                checkPost(f, lineNo);
                break;
            case "bad": {
                boolean rejected;
                try {
                    Postprocess.classify(floats(f[1]), new String[floats(f[1]).length]);
                    rejected = false;
                } catch (IllegalArgumentException e) {
                    rejected = true;
                }
                count(kind, rejected, "line " + lineNo + " logits " + Arrays.toString(floats(f[1]))
                        + " were accepted");
                break;
            }
            case "stats":
                checkStats(f, lineNo);
                break;
            default:
                count("unknown", false, "line " + lineNo + " has unknown kind " + quote(kind));
        }
    }

    private void checkEncoding(String[] f, int lineNo) {
        String text = text(f[1]);
        String pair = f[2].equals("-") ? null : text(f[2]);
        int maxLength = Integer.parseInt(f[3]);
        boolean pad = f[4].equals("1");
        int[] wantIds = ints(f[5]);
        int[] wantTypes = ints(f[6]);
        int[] wantMask = ints(f[7]);
        Encoding e;
        try {
            e = tok.encode(text, pair, maxLength, true, pad);
        } catch (RuntimeException ex) {
            count("enc", false, "line " + lineNo + " " + quote(text) + " threw " + ex);
            return;
        }
        boolean ok = Arrays.equals(e.inputIds(), wantIds)
                && Arrays.equals(e.tokenTypeIds(), wantTypes)
                && Arrays.equals(e.attentionMask(), wantMask);
        String detail = "line " + lineNo + " text " + quote(text)
                + (pair != null ? " pair " + quote(pair) : "") + " max_length " + maxLength
                + "\n  java   " + Arrays.toString(e.inputIds()) + " " + Arrays.toString(tok.pieces(e.inputIds()))
                + "\n  python " + Arrays.toString(wantIds) + " " + Arrays.toString(tok.pieces(wantIds))
                + (Arrays.equals(e.tokenTypeIds(), wantTypes) ? "" : "\n  types differ")
                + (Arrays.equals(e.attentionMask(), wantMask) ? "" : "\n  mask differs");
        count(pair == null ? "enc-single" : "enc-pair", ok, detail);
    }

    private void checkPost(String[] f, int lineNo) {
        String[] b64 = f[1].split(",", -1);
        String[] labels = new String[b64.length];
        for (int i = 0; i < b64.length; i++) {
            labels[i] = text(b64[i]);
        }
        float[] logits = floats(f[2]);
        int wantIndex = Integer.parseInt(f[3]);
        float[] wantProbs = floats(f[4]);
        Postprocess.Prediction p;
        try {
            p = Postprocess.classify(logits, labels);
        } catch (RuntimeException ex) {
            count("post", false, "line " + lineNo + " threw " + ex);
            return;
        }
        boolean ok = p.labelIndex == wantIndex
                && p.label.equals(labels[wantIndex])
                && Float.floatToRawIntBits(p.probability) == Float.floatToRawIntBits(wantProbs[wantIndex])
                && bitsEqual(p.probabilities(), wantProbs);
        count("post", ok, "line " + lineNo + " logits " + Arrays.toString(logits) + "\n  java   "
                + p.labelIndex + " " + Arrays.toString(p.probabilities()) + "\n  python " + wantIndex
                + " " + Arrays.toString(wantProbs));
    }

    private void checkStats(String[] f, int lineNo) {
        double[] values = doubles(f[1]);
        double[] want = new double[7];
        for (int i = 0; i < want.length; i++) {
            want[i] = Double.longBitsToDouble(Long.parseUnsignedLong(f[2 + i], 16));
        }
        LatencyStats s = LatencyStats.of(values);
        double[] got = {s.p50, s.p90, s.p99, s.mean, s.std, s.min, s.max};
        boolean ok = s.runs == values.length;
        for (int i = 0; i < want.length; i++) {
            ok &= Math.abs(got[i] - want[i]) <= 1e-9 * Math.max(1.0, Math.abs(want[i]));
        }
        count("stats", ok, "line " + lineNo + " java " + Arrays.toString(got) + " harness "
                + Arrays.toString(want));
    }

    private static boolean bitsEqual(float[] a, float[] b) {
        if (a.length != b.length) {
            return false;
        }
        for (int i = 0; i < a.length; i++) {
            if (Float.floatToRawIntBits(a[i]) != Float.floatToRawIntBits(b[i])) {
                return false;
            }
        }
        return true;
    }

    private static String text(String b64) {
        return new String(Base64.getDecoder().decode(b64), StandardCharsets.UTF_8);
    }

    private static int[] ints(String csv) {
        if (csv.isEmpty()) {
            return new int[0];
        }
        String[] parts = csv.split(",");
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            out[i] = Integer.parseInt(parts[i]);
        }
        return out;
    }

    private static float[] floats(String csv) {
        String[] parts = csv.split(",");
        float[] out = new float[parts.length];
        for (int i = 0; i < parts.length; i++) {
            out[i] = Float.intBitsToFloat(Integer.parseUnsignedInt(parts[i], 16));
        }
        return out;
    }

    private static double[] doubles(String csv) {
        String[] parts = csv.split(",");
        double[] out = new double[parts.length];
        for (int i = 0; i < parts.length; i++) {
            out[i] = Double.longBitsToDouble(Long.parseUnsignedLong(parts[i], 16));
        }
        return out;
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder();
        Json.quote(s, sb);
        return sb.toString();
    }
}
