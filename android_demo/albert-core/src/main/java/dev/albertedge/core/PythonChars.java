package dev.albertedge.core;

/**
 * Python's {@code str.isspace()} and {@code str.isdigit()} for single code points.
 *
 * <p>Why: the reference tokenizer is Python ({@code albert_edge/tokenizer.py}) and two of
 * its rules use these predicates ([MASK] absorbs the {@code \s*} before it; pieces ending
 * in a digit and a comma are penalised). Java's {@code Character.isWhitespace} and
 * {@code Character.isDigit} answer differently (no-break spaces; superscript and circled
 * digits), so the Python sets (Unicode 14, as in CPython 3.11) are spelled out here.
 */
public final class PythonChars {
    private PythonChars() {}

    /** {@code chr(cp).isspace()}: bidi classes WS, B, S or category Zs. */
    public static boolean isSpace(int cp) {
        if (cp <= 0x20) {
            return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
        }
        switch (cp) {
            case 0x85:
            case 0xA0:
            case 0x1680:
            case 0x2028:
            case 0x2029:
            case 0x202F:
            case 0x205F:
            case 0x3000:
                return true;
            default:
                return cp >= 0x2000 && cp <= 0x200A;
        }
    }

    // Code points with Numeric_Type=Digit (isdigit() but not isdecimal()), as ranges.
    private static final int[] DIGIT_RANGES = {
        0xB2, 0xB3, 0xB9, 0xB9, 0x1369, 0x1371, 0x19DA, 0x19DA, 0x2070, 0x2070,
        0x2074, 0x2079, 0x2080, 0x2089, 0x2460, 0x2468, 0x2474, 0x247C, 0x2488, 0x2490,
        0x24EA, 0x24EA, 0x24F5, 0x24FD, 0x24FF, 0x24FF, 0x2776, 0x277E, 0x2780, 0x2788,
        0x278A, 0x2792, 0x10A40, 0x10A43, 0x10E60, 0x10E68, 0x11052, 0x1105A,
        0x1F100, 0x1F10A,
    };

    /** {@code chr(cp).isdigit()}: Numeric_Type Decimal (category Nd) or Digit. */
    public static boolean isDigit(int cp) {
        if (Character.getType(cp) == Character.DECIMAL_DIGIT_NUMBER) {
            return true;
        }
        for (int i = 0; i < DIGIT_RANGES.length; i += 2) {
            if (cp >= DIGIT_RANGES[i] && cp <= DIGIT_RANGES[i + 1]) {
                return true;
            }
        }
        return false;
    }
}
