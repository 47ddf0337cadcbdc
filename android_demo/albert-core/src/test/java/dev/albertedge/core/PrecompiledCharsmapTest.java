package dev.albertedge.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import org.junit.Test;

/** Expected values are SentencePiece's own (its C++ normalizer, run from Python). */
public class PrecompiledCharsmapTest {
    private static PrecompiledCharsmap real() {
        return new PrecompiledCharsmap(TestModels.realModel().precompiledCharsmap());
    }

    @Test
    public void appliesNmtNfkcRules() {
        PrecompiledCharsmap m = real();
        assertEquals("FULL width", m.normalize("ＦＵＬＬ width"));
        assertEquals("a b c", m.normalize("a\tb\nc"));
        assertEquals("1⁄2", m.normalize("½"));
        assertEquals("fine", m.normalize("ﬁne"));
        assertEquals("x y", m.normalize("x\u200by"));
        assertEquals("", m.normalize("\u0001\u007f"));
        assertEquals("1", m.normalize("①"));
        assertEquals("平成", m.normalize("㍻"));
        assertEquals("plain ascii stays", m.normalize("plain ascii stays"));
        assertEquals("🙂 emoji", m.normalize("🙂 emoji"));
        assertEquals("", m.normalize(""));
    }

    @Test
    public void rejectsBlobsThatDoNotFit() {
        for (byte[] blob : new byte[][] {
            new byte[3], new byte[] {(byte) 0xFF, 0, 0, 0, 1, 2, 3, 4}, new byte[] {3, 0, 0, 0, 1, 2, 3, 4, 5}
        }) {
            try {
                new PrecompiledCharsmap(blob);
                fail("accepted a blob of " + blob.length + " bytes");
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage().contains("charsmap"));
            }
        }
    }
}
