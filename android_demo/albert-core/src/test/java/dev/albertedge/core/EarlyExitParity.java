package dev.albertedge.core;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Java's dynamic exit against Python's, on golden per-exit logits written by
 * {@code tests/test_android_java.py} (ONNX Runtime, the trained model, every SST-2 dev
 * sentence). Usage: {@code EarlyExitParity <golden.tsv> <batch>}. Lines, tab separated:
 * <pre>
 * exits   L  labels
 * row     logits of exits 1..L (float32 bits hex, comma separated, exit-major)
 * policy  spec  depths(comma)  labels(comma)      (Python's runner, one per row)
 * </pre>
 * Runs {@link EarlyExit#run} over the rows in batches of {@code batch} per policy and prints
 * {@code checked=N mismatches=M}; exits 1 on any mismatch, 2 on bad usage.
 */
public final class EarlyExitParity {
    private EarlyExitParity() {}

    private static int[] ints(String csv) {
        String[] parts = csv.split(",");
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            out[i] = Integer.parseInt(parts[i]);
        }
        return out;
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: EarlyExitParity <golden.tsv> <batch>");
            System.exit(2);
        }
        int batch = Integer.parseInt(args[1]);
        int exits = 0;
        int labels = 0;
        List<float[][]> rows = new ArrayList<>();
        List<String[]> policies = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(
                new FileInputStream(args[0]), StandardCharsets.UTF_8))) {
            for (String line = r.readLine(); line != null; line = r.readLine()) {
                String[] f = line.split("\t", -1);
                if (f[0].equals("exits")) {
                    exits = Integer.parseInt(f[1]);
                    labels = Integer.parseInt(f[2]);
                } else if (f[0].equals("row")) {
                    String[] hex = f[1].split(",");
                    float[][] logits = new float[exits][labels];
                    for (int i = 0; i < hex.length; i++) {
                        logits[i / labels][i % labels] =
                                Float.intBitsToFloat((int) Long.parseLong(hex[i], 16));
                    }
                    rows.add(logits);
                } else if (f[0].equals("policy")) {
                    policies.add(f);
                }
            }
        }
        float[][][] table = rows.toArray(new float[0][][]);
        int checked = 0;
        int mismatches = 0;
        for (String[] p : policies) {
            EarlyExit.Policy policy = EarlyExit.Policy.parse(p[1]);
            int[] wantDepth = ints(p[2]);
            int[] wantLabel = ints(p[3]);
            ReplayStepper stepper = new ReplayStepper(table);
            for (int start = 0; start < table.length; start += batch) {
                int n = Math.min(batch, table.length - start);
                int[][] ids = new int[n][];
                for (int i = 0; i < n; i++) {
                    ids[i] = new int[] {start + i};
                }
                EarlyExit.Result res = EarlyExit.run(stepper, ids, ids, ids, policy);
                for (int i = 0; i < n; i++) {
                    int row = start + i;
                    checked++;
                    boolean ok = res.depth[i] == wantDepth[row] && res.label(i) == wantLabel[row]
                            && stepper.layersRun[row] == wantDepth[row];
                    if (!ok) {
                        if (mismatches++ < 10) {
                            System.out.println(policy + " row " + row + ": java depth " + res.depth[i]
                                    + " label " + res.label(i) + " stepped " + stepper.layersRun[row]
                                    + ", python depth " + wantDepth[row] + " label " + wantLabel[row]);
                        }
                    }
                }
            }
        }
        System.out.println("checked=" + checked + " mismatches=" + mismatches);
        System.exit(mismatches == 0 && checked > 0 ? 0 : 1);
    }
}
