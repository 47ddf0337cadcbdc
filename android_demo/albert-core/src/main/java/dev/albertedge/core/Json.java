package dev.albertedge.core;

import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * A small JSON writer for the benchmark report.
 *
 * <p>Why not {@code org.json}: it is an Android framework class, and this module must run
 * on a plain JVM (where its tests run). Values: {@code null}, {@link Boolean},
 * {@link Number} (integers stay integers; non-finite doubles become {@code null}, which
 * JSON has no other way to say), {@link CharSequence}, {@link Map} with string keys (in
 * iteration order) and {@link List}.
 */
public final class Json {
    private Json() {}

    public static String write(Object value) {
        StringBuilder sb = new StringBuilder();
        write(value, sb, 0, true);
        return sb.toString();
    }

    /** Compact single-line form. */
    public static String writeCompact(Object value) {
        StringBuilder sb = new StringBuilder();
        write(value, sb, 0, false);
        return sb.toString();
    }

    private static void newline(StringBuilder sb, int indent, boolean pretty) {
        if (pretty) {
            sb.append('\n');
            for (int i = 0; i < indent; i++) {
                sb.append("  ");
            }
        }
    }

    private static void write(Object v, StringBuilder sb, int indent, boolean pretty) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean) {
            sb.append(((Boolean) v) ? "true" : "false");
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                sb.append("null");
            } else {
                sb.append(Double.toString(d));
            }
        } else if (v instanceof Number) {
            sb.append(((Number) v).longValue());
        } else if (v instanceof CharSequence) {
            quote(v.toString(), sb);
        } else if (v instanceof Map) {
            Map<?, ?> m = (Map<?, ?>) v;
            if (m.isEmpty()) {
                sb.append("{}");
                return;
            }
            sb.append('{');
            Iterator<? extends Map.Entry<?, ?>> it = m.entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry<?, ?> e = it.next();
                newline(sb, indent + 1, pretty);
                quote(String.valueOf(e.getKey()), sb);
                sb.append(pretty ? ": " : ":");
                write(e.getValue(), sb, indent + 1, pretty);
                if (it.hasNext()) {
                    sb.append(',');
                }
            }
            newline(sb, indent, pretty);
            sb.append('}');
        } else if (v instanceof List) {
            List<?> l = (List<?>) v;
            if (l.isEmpty()) {
                sb.append("[]");
                return;
            }
            sb.append('[');
            for (int i = 0; i < l.size(); i++) {
                newline(sb, indent + 1, pretty);
                write(l.get(i), sb, indent + 1, pretty);
                if (i + 1 < l.size()) {
                    sb.append(',');
                }
            }
            newline(sb, indent, pretty);
            sb.append(']');
        } else {
            throw new IllegalArgumentException("cannot write " + v.getClass().getName() + " as JSON");
        }
    }

    static void quote(String s, StringBuilder sb) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c == 0x2028 || c == 0x2029) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
