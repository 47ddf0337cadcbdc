package dev.albertedge.core;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON reader for the test fixtures: objects become {@code Map<String, Object>},
 * arrays {@code List<Object>}, numbers {@link Num} (the literal kept, so a float32 logit is
 * read with {@code Float.parseFloat} and a double score with {@code Double.parseDouble},
 * each correctly rounded from the decimal Python wrote).
 */
final class MiniJson {
    /** A JSON number, as written. */
    static final class Num {
        final String text;

        Num(String text) {
            this.text = text;
        }

        float f32() {
            return Float.parseFloat(text);
        }

        double f64() {
            return Double.parseDouble(text);
        }

        int i32() {
            return Integer.parseInt(text);
        }
    }

    private final String s;
    private int pos;

    private MiniJson(String s) {
        this.s = s;
    }

    static Object parse(String text) {
        MiniJson p = new MiniJson(text);
        Object v = p.value();
        p.ws();
        if (p.pos != text.length()) {
            throw p.error("trailing characters");
        }
        return v;
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("JSON: " + what + " at offset " + pos);
    }

    private void ws() {
        while (pos < s.length() && " \t\r\n".indexOf(s.charAt(pos)) >= 0) {
            pos++;
        }
    }

    private Object value() {
        ws();
        if (pos >= s.length()) {
            throw error("unexpected end");
        }
        char c = s.charAt(pos);
        if (c == '{') {
            pos++;
            Map<String, Object> m = new LinkedHashMap<>();
            ws();
            if (s.charAt(pos) == '}') {
                pos++;
                return m;
            }
            while (true) {
                ws();
                String k = string();
                ws();
                expect(':');
                m.put(k, value());
                ws();
                if (s.charAt(pos) == ',') {
                    pos++;
                } else {
                    expect('}');
                    return m;
                }
            }
        }
        if (c == '[') {
            pos++;
            List<Object> a = new ArrayList<>();
            ws();
            if (s.charAt(pos) == ']') {
                pos++;
                return a;
            }
            while (true) {
                a.add(value());
                ws();
                if (s.charAt(pos) == ',') {
                    pos++;
                } else {
                    expect(']');
                    return a;
                }
            }
        }
        if (c == '"') {
            return string();
        }
        if (s.startsWith("true", pos)) {
            pos += 4;
            return Boolean.TRUE;
        }
        if (s.startsWith("false", pos)) {
            pos += 5;
            return Boolean.FALSE;
        }
        if (s.startsWith("null", pos)) {
            pos += 4;
            return null;
        }
        int start = pos;
        while (pos < s.length() && "+-0123456789.eE".indexOf(s.charAt(pos)) >= 0) {
            pos++;
        }
        if (start == pos) {
            throw error("unexpected character " + c);
        }
        return new Num(s.substring(start, pos));
    }

    private void expect(char c) {
        if (pos >= s.length() || s.charAt(pos) != c) {
            throw error("expected '" + c + "'");
        }
        pos++;
    }

    private String string() {
        expect('"');
        StringBuilder sb = new StringBuilder();
        while (true) {
            if (pos >= s.length()) {
                throw error("unterminated string");
            }
            char c = s.charAt(pos++);
            if (c == '"') {
                return sb.toString();
            }
            if (c != '\\') {
                sb.append(c);
                continue;
            }
            char e = s.charAt(pos++);
            switch (e) {
                case 'n': sb.append('\n'); break;
                case 't': sb.append('\t'); break;
                case 'r': sb.append('\r'); break;
                case 'b': sb.append('\b'); break;
                case 'f': sb.append('\f'); break;
                case 'u':
                    sb.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16));
                    pos += 4;
                    break;
                default: sb.append(e);
            }
        }
    }
}
