package dev.albertedge.core;

import java.io.BufferedWriter;
import java.io.File;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

/**
 * Prints, for every scalar value in {@code [0x20, 0x30000)} (surrogates excluded), what the
 * tokenizer's Unicode-database steps (NFKD, drop non-spacing marks, lower-case) make of it
 * on this JVM: {@code <cp hex>\t<result code points hex, space-separated>}.
 *
 * <p>The Python test compares this table with its own to find the characters whose
 * Unicode properties differ between the JVM's Unicode version and Python's; only those are
 * left out of the every-character parity sweep (and counted). Usage:
 * {@code UnicodeTable <spiece.model>}.
 */
public final class UnicodeTable {
    public static void main(String[] args) {
        AlbertTokenizer tok = AlbertTokenizer.load(new File(args[0]));
        PrintWriter out = new PrintWriter(new BufferedWriter(
                new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16));
        StringBuilder sb = new StringBuilder();
        for (int cp = 0x20; cp < 0x30000; cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF) {
                continue;
            }
            String r = tok.unicodeSteps(new String(Character.toChars(cp)));
            sb.setLength(0);
            sb.append(Integer.toHexString(cp)).append('\t');
            for (int i = 0; i < r.length(); ) {
                int c = r.codePointAt(i);
                if (i > 0) {
                    sb.append(' ');
                }
                sb.append(Integer.toHexString(c));
                i += Character.charCount(c);
            }
            out.println(sb);
        }
        out.flush();
    }
}
