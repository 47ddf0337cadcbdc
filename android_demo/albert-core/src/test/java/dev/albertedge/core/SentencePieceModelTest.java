package dev.albertedge.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.charset.StandardCharsets;
import org.junit.Test;

public class SentencePieceModelTest {
    @Test
    public void readsTheRealAlbertModel() {
        SentencePieceModel m = TestModels.realModel();
        assertEquals(30000, m.size());
        assertEquals("<pad>", m.piece(0));
        assertEquals(SentencePieceModel.CONTROL, m.type(0));
        assertEquals("<unk>", m.piece(1));
        assertEquals(SentencePieceModel.UNKNOWN, m.type(1));
        assertEquals(1, m.unkId());
        assertEquals("[MASK]", m.piece(4));
        String[] userDefined = {"(", ")", "\"", "-", ".", "–", "£", "€"};
        for (int i = 0; i < userDefined.length; i++) {
            assertEquals(userDefined[i], m.piece(5 + i));
            assertEquals(SentencePieceModel.USER_DEFINED, m.type(5 + i));
        }
        assertEquals("▁", m.piece(13));
        assertEquals(SentencePieceModel.NORMAL, m.type(13));
        assertEquals(-2.1889710426330566f, m.score(13), 0f);
        assertEquals(SentencePieceModel.MODEL_UNIGRAM, m.modelType());
        assertEquals("nmt_nfkc", m.normalizerName());
        assertEquals(237539, m.precompiledCharsmap().length);
        assertEquals(2998, m.idOf("▁journey"));
    }

    private static void expectTokenizerError(Runnable r, String... fragments) {
        try {
            r.run();
            fail("expected a TokenizerException");
        } catch (TokenizerException e) {
            for (String f : fragments) {
                assertTrue(e.getMessage(), e.getMessage().contains(f));
            }
            assertTrue("one line: " + e.getMessage(), !e.getMessage().contains("\n"));
        }
    }

    @Test
    public void badFilesFailWithOneLineNamingTheFile() {
        expectTokenizerError(() -> SentencePieceModel.load(new File("/nonexistent/spiece.model")),
                "/nonexistent/spiece.model", "not found");
        byte[] junk = "\u0000garbage\u0000garbage".getBytes(StandardCharsets.ISO_8859_1);
        expectTokenizerError(() -> SentencePieceModel.parse(junk, "junk.model"),
                "junk.model", "not a readable SentencePiece model");
        expectTokenizerError(() -> SentencePieceModel.parse(new byte[0], "empty.model"),
                "empty.model", "no pieces");
        byte[] bpe = TestModels.model(2, TestModels.p("a", 0, 1), TestModels.p("<unk>", 0, 2));
        expectTokenizerError(() -> SentencePieceModel.parse(bpe, "bpe.model"),
                "bpe.model", "BPE is not supported");
        byte[] noSpecials = TestModels.model(1, TestModels.p("a", 0, 1), TestModels.p("<unk>", 0, 2));
        expectTokenizerError(
                () -> new AlbertTokenizer(SentencePieceModel.parse(noSpecials, "plain.model")),
                "plain.model", "lacks ALBERT's special pieces", "[CLS]");
    }

    @Test
    public void truncatedRealModelIsRejected() {
        byte[] whole;
        try (java.io.InputStream in = new java.io.FileInputStream(TestModels.realModelFile())) {
            java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
            byte[] buf = new byte[1 << 16];
            int n;
            while ((n = in.read(buf)) > 0) {
                out.write(buf, 0, n);
            }
            whole = out.toByteArray();
        } catch (java.io.IOException e) {
            throw new AssertionError(e);
        }
        byte[] cut = java.util.Arrays.copyOf(whole, whole.length / 2);
        expectTokenizerError(() -> SentencePieceModel.parse(cut, "half.model"), "half.model");
    }
}
