package dev.albertedge.core;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import org.junit.Test;

/**
 * Expected ids on the real model are transformers' AlbertTokenizerFast's (the Python test
 * checks every SST-2 dev sentence; these pin the rules one by one).
 */
public class AlbertTokenizerTest {
    private static final int N = SentencePieceModel.NORMAL;

    /** Ids 5.. : ▁, ▁a, b, ▁ab, ▁1,, ▁1, ",", and "-" (user-defined). */
    private static AlbertTokenizer tiny() {
        return new AlbertTokenizer(TestModels.tiny(
                TestModels.p("▁", -2, N),
                TestModels.p("▁a", -1, N),
                TestModels.p("b", -3, N),
                TestModels.p("▁ab", -3.5, N),
                TestModels.p("▁1,", -1, N),
                TestModels.p("▁1", -2, N),
                TestModels.p(",", -2, N),
                TestModels.p("-", 0, SentencePieceModel.USER_DEFINED)));
    }

    private static AlbertTokenizer real() {
        return new AlbertTokenizer(TestModels.realModel());
    }

    @Test
    public void viterbiPicksTheBestScoringSegmentation() {
        AlbertTokenizer t = tiny();
        assertArrayEquals(new int[] {8}, t.tokenizeIds("ab")); // ▁ab (-3.5) beats ▁a + b (-4)
        assertArrayEquals(new int[] {6, 6}, t.tokenizeIds("A a"));
    }

    @Test
    public void digitCommaPiecesArePenalisedLikeTransformers() {
        // Without the −100 penalty "▁1," (−1) would beat "▁1" + "," (−4).
        assertArrayEquals(new int[] {10, 11}, tiny().tokenizeIds("1,"));
    }

    @Test
    public void unknownCharactersFuseIntoOneUnk() {
        AlbertTokenizer t = tiny();
        assertArrayEquals(new int[] {5, 1}, t.tokenizeIds("zzz"));
        assertArrayEquals(new int[] {5, 1, 7}, t.tokenizeIds("z🙂b"));
    }

    @Test
    public void userDefinedPiecesSplitTheRawText() {
        // "a-b" → "a" | "-" | "b"; each segment gets its own ▁.
        assertArrayEquals(new int[] {6, 12, 5, 7}, tiny().tokenizeIds("a-b"));
    }

    @Test
    public void realModelMatchesTransformers() {
        AlbertTokenizer t = real();
        assertArrayEquals(new int[] {2, 32, 13, 22, 18, 21, 13275, 17, 478, 13808, 2998, 13, 9, 13, 3},
                t.encode("it 's a charming and often affecting journey . ").inputIds());
        assertArrayEquals(new int[] {2, 10975, 15, 126, 187, 3}, t.encode("Hello, World!").inputIds());
        assertArrayEquals(new int[] {2, 680, 8, 732, 10880, 18, 318, 1719, 13, 9, 3},
                t.encode("k-19 exploits our fear .").inputIds());
        assertArrayEquals(new int[] {2, 21, 4, 334, 3}, t.encode("a [MASK] b").inputIds());
        assertArrayEquals(new int[] {2, 21, 4, 3}, t.encode("a[MASK]").inputIds());
        assertArrayEquals(new int[] {2, 3}, t.encode("").inputIds());
    }

    @Test
    public void pairsTruncateLongestFirstAndPad() {
        AlbertTokenizer t = real();
        Encoding e = t.encode("hello there", "general kenobi you are a bold one", 10, true, true);
        assertArrayEquals(new int[] {2, 10975, 80, 3, 297, 2639, 14398, 42, 50, 3}, e.inputIds());
        assertArrayEquals(new int[] {0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, e.tokenTypeIds());
        assertTrue(e.truncated());
        e = t.encode("one two three four five six seven", "x", 8, true, true);
        assertArrayEquals(new int[] {2, 53, 81, 132, 222, 3, 993, 3}, e.inputIds());
        assertArrayEquals(new int[] {0, 0, 0, 0, 0, 0, 1, 1}, e.tokenTypeIds());
        e = t.encode("short", null, 6, true, true);
        assertArrayEquals(new int[] {2, 502, 3, 0, 0, 0}, e.inputIds());
        assertArrayEquals(new int[] {1, 1, 1, 0, 0, 0}, e.attentionMask());
        assertEquals(3, e.length());
        assertFalse(e.truncated());
        assertArrayEquals(new long[] {2, 502, 3, 0, 0, 0}, e.inputIdsLong());
    }

    @Test
    public void overlongInputWithoutTruncationFails() {
        try {
            real().encode("one two three four five", null, 4, false, false);
            fail("no error");
        } catch (TokenizerException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("max_length=4"));
        }
        try {
            real().encode("x", "y", 2, true, false);
            fail("no error");
        } catch (TokenizerException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("no room"));
        }
    }

    @Test
    public void smallestBucketThatFitsIsUsed() {
        AlbertTokenizer t = real();
        int[] buckets = {32, 64, 128};
        Encoding e = t.encodeForBuckets("a short one", buckets);
        assertEquals(32, e.width());
        StringBuilder forty = new StringBuilder();
        for (int i = 0; i < 40; i++) {
            forty.append("a ");
        }
        e = t.encodeForBuckets(forty.toString(), buckets); // 40 × ▁a, a final ▁, CLS, SEP = 43
        assertEquals(64, e.width());
        assertEquals(43, e.length());
        assertFalse(e.truncated());
        StringBuilder long_ = new StringBuilder();
        for (int i = 0; i < 300; i++) {
            long_.append("word ");
        }
        e = t.encodeForBuckets(long_.toString(), buckets);
        assertEquals(128, e.width());
        assertEquals(128, e.length());
        assertTrue(e.truncated());
        assertEquals(t.sepId, e.inputIds()[127]);
    }

    @Test
    public void handBuiltEncodingsCountTheirRealTokens() {
        Encoding e = Encoding.of(new int[] {2, 3, 0}, new int[] {1, 1, 0}, new int[3]);
        assertEquals(3, e.width());
        assertEquals(2, e.length());
        try {
            Encoding.of(new int[2], new int[3], new int[2]);
            fail("accepted arrays of different lengths");
        } catch (IllegalArgumentException expected) {
            assertTrue(expected.getMessage().contains("differ in length"));
        }
    }

    @Test
    public void normalizationStepsMatchPython() {
        AlbertTokenizer t = real();
        assertEquals("full width", t.normalize("ＦＵＬＬ width"));
        assertEquals("cafe naive \"q\" \"q\"", t.normalize("Café naïve ``q'' ''q``"));
        assertEquals("a b", t.normalize("a  \t  b"));
        assertEquals("ας", t.normalize("ΑΣ"));
    }
}
