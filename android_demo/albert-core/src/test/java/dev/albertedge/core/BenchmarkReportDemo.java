package dev.albertedge.core;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Writes a small but real {@code albert-edge-bench/1} report on the JVM, for the Python
 * side to validate with the harness's own schema checker: one row times this module's
 * tokenizer (a real workload, so every field is a real measurement) and one row is a
 * backend the JVM cannot run (recorded as skipped, with its reason).
 *
 * <p>Usage: {@code BenchmarkReportDemo <spiece.model> <out.json>}.
 */
public final class BenchmarkReportDemo {
    private static final String[] TEXTS = {
        "it 's a charming and often affecting journey . ",
        "unflinchingly bleak and desperate ",
        "the acting , costumes , music , cinematography and sound are all astounding .",
        "a sometimes tedious film .",
    };

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: BenchmarkReportDemo <spiece.model> <out.json>");
            System.exit(2);
        }
        final File spiece = new File(args[0]);
        final AlbertTokenizer[] holder = new AlbertTokenizer[1];
        BenchmarkResult template = new BenchmarkResult();
        template.artifact = spiece.getName();
        template.format = "spiece";
        template.precision = "n/a";
        template.backend = "java-tokenizer";
        template.device = "cpu";
        template.seqLen = 32;
        template.threads = 1;
        template.fileBytes = spiece.length();

        BenchmarkResult ok = BenchmarkRunner.measure(template, () -> {
            holder[0] = AlbertTokenizer.load(spiece);
            return new BenchmarkRunner.Session() {
                @Override
                public void run(int index) {
                    holder[0].encodeForBuckets(TEXTS[index % TEXTS.length], new int[] {32, 64, 128});
                }

                @Override
                public void close() {
                    holder[0] = null;
                }
            };
        }, 2, 20);

        BenchmarkResult skippedTemplate = template.copy();
        skippedTemplate.backend = "litert-gpu";
        skippedTemplate.device = "gpu";
        BenchmarkResult skipped = BenchmarkRunner.measure(skippedTemplate, () -> {
            throw new BenchmarkRunner.Unsupported("no GPU delegate on a plain JVM");
        }, 0, 1);

        Map<String, String> versions = new LinkedHashMap<>();
        versions.put("java", System.getProperty("java.version"));
        BenchmarkReport report = new BenchmarkReport()
                .machine(System.getProperty("os.arch"), System.getProperty("os.name") + " "
                        + System.getProperty("os.version"), versions)
                .add(ok)
                .add(skipped);
        report.settings().put("runs", 20);
        report.settings().put("warmup", 2);
        report.settings().put("inputs", "4 SST-2 sentences");
        try (Writer w = new OutputStreamWriter(new FileOutputStream(args[1]), StandardCharsets.UTF_8)) {
            w.write(report.toJson());
        }
        if (!BenchmarkResult.OK.equals(ok.status)) {
            System.err.println("tokenizer row did not run: " + ok.reason);
            System.exit(1);
        }
    }
}
