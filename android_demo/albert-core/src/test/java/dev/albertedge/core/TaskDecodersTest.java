package dev.albertedge.core;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/**
 * {@link SpanDecoder} and {@link EntityDecoder} against {@code albert_edge.tasks}: the
 * fixtures (written by {@code android_demo/scripts/make_task_fixtures.py}) hold a tiny
 * random ALBERT's PyTorch logits on real SQuAD dev questions and on synthetic CoNLL-style
 * sentences, the windows Python fed it, and what Python decoded. Every span text, score
 * and null score, every tag and every entity must be equal; with the real SentencePiece
 * model ({@code -Dalbert.spiece}) the Java windows must equal Python's too.
 *
 * <p>Fixtures: {@code -Dalbert.tasks.fixtures=<dir>} (tests/test_android_java_tasks.py
 * passes freshly generated ones), else the committed {@code src/test/resources/tasks/}.
 */
public class TaskDecodersTest {
    private static final String[] CANDIDATES = {
        "src/test/resources/tasks", "android_demo/albert-core/src/test/resources/tasks",
    };

    static File fixture(String name) {
        String dir = System.getProperty("albert.tasks.fixtures");
        List<String> dirs = new ArrayList<>();
        if (dir != null) {
            dirs.add(dir);
        } else {
            dirs.addAll(Arrays.asList(CANDIDATES));
        }
        for (String d : dirs) {
            File f = new File(d, name);
            if (f.isFile()) {
                return f;
            }
        }
        assumeTrue("task fixture " + name + " not found in " + dirs, false);
        return null;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> load(String name) throws IOException {
        byte[] bytes = Files.readAllBytes(fixture(name).toPath());
        return (Map<String, Object>) MiniJson.parse(new String(bytes, StandardCharsets.UTF_8));
    }

    @SuppressWarnings("unchecked")
    static List<Object> list(Object o) {
        return (List<Object>) o;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> map(Object o) {
        return (Map<String, Object>) o;
    }

    static int i32(Object o) {
        return ((MiniJson.Num) o).i32();
    }

    static int[] ints(Object o) {
        List<Object> l = list(o);
        int[] out = new int[l.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = i32(l.get(i));
        }
        return out;
    }

    static boolean[] bools(Object o) {
        int[] v = ints(o);
        boolean[] out = new boolean[v.length];
        for (int i = 0; i < v.length; i++) {
            out[i] = v[i] != 0;
        }
        return out;
    }

    static float[] floats(Object o) {
        List<Object> l = list(o);
        float[] out = new float[l.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = ((MiniJson.Num) l.get(i)).f32();
        }
        return out;
    }

    static String[] strings(Object o) {
        List<Object> l = list(o);
        String[] out = new String[l.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = (String) l.get(i);
        }
        return out;
    }

    /** Features of example {@code e}, in order. */
    static List<Map<String, Object>> featuresOf(Map<String, Object> fx, int e) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object f : list(fx.get("features"))) {
            if (i32(map(f).get("example")) == e) {
                out.add(map(f));
            }
        }
        return out;
    }

    // --- question answering -----------------------------------------------------------

    @Test
    public void spansMatchPythonOnSquadQuestions() throws IOException {
        Map<String, Object> fx = load("squad_spans.json");
        List<Object> examples = list(fx.get("examples"));
        int checked = 0;
        int found = 0;
        for (Object setting : list(fx.get("expected"))) {
            int nBest = i32(map(setting).get("n_best"));
            int maxAnswer = i32(map(setting).get("max_answer_length"));
            List<Object> answers = list(map(setting).get("answers"));
            assertEquals(examples.size(), answers.size());
            for (int e = 0; e < examples.size(); e++) {
                Map<String, Object> ex = map(examples.get(e));
                SpanDecoder.Words words = SpanDecoder.splitWords((String) ex.get("context"));
                List<SpanDecoder.Window> windows = new ArrayList<>();
                List<float[]> starts = new ArrayList<>();
                List<float[]> ends = new ArrayList<>();
                for (Map<String, Object> f : featuresOf(fx, e)) {
                    windows.add(SpanDecoder.Window.of(ints(f.get("input_ids")),
                            ints(f.get("token_type_ids")), ints(f.get("word_ids")),
                            bools(f.get("max_context"))));
                    starts.add(floats(f.get("start_logits")));
                    ends.add(floats(f.get("end_logits")));
                }
                assertFalse(windows.isEmpty());
                SpanDecoder.Answer got = SpanDecoder.best(words, windows, starts, ends, nBest, maxAnswer);
                Map<String, Object> want = map(answers.get(e));
                String where = ex.get("id") + " n_best=" + nBest + " max=" + maxAnswer;
                assertEquals(where, want.get("text"), got.text);
                Object score = want.get("score");
                if (score == null) {
                    assertFalse(where, got.found());
                    assertEquals(where, Double.NEGATIVE_INFINITY, got.score, 0.0);
                } else {
                    assertTrue(where, got.found());
                    assertEquals(where, ((MiniJson.Num) score).f64(), got.score, 0.0);
                    assertEquals(where, got.text,
                            words.context.substring(got.charStart, got.charEnd));
                    found++;
                }
                assertEquals(where, ((MiniJson.Num) want.get("null_score")).f64(), got.nullScore, 0.0);
                checked++;
            }
        }
        assertTrue("too few questions: " + checked, checked >= 30);
        assertTrue("too few spans found: " + found, found >= checked / 2);
    }

    @Test
    public void windowsMatchPythonOnSquadQuestions() throws IOException {
        AlbertTokenizer tok = new AlbertTokenizer(TestModels.realModel());
        Map<String, Object> fx = load("squad_spans.json");
        int maxLen = i32(fx.get("max_len"));
        int stride = i32(fx.get("stride"));
        List<Object> examples = list(fx.get("examples"));
        int multi = 0;
        for (int e = 0; e < examples.size(); e++) {
            Map<String, Object> ex = map(examples.get(e));
            SpanDecoder.Words words = SpanDecoder.splitWords((String) ex.get("context"));
            List<SpanDecoder.Window> got = SpanDecoder.windows(tok, (String) ex.get("question"),
                    words, maxLen, stride);
            List<Map<String, Object>> want = featuresOf(fx, e);
            String where = String.valueOf(ex.get("id"));
            assertEquals(where, want.size(), got.size());
            multi += got.size() > 1 ? 1 : 0;
            for (int k = 0; k < got.size(); k++) {
                assertArrayEquals(where, ints(want.get(k).get("input_ids")), got.get(k).inputIds);
                assertArrayEquals(where, ints(want.get(k).get("token_type_ids")), got.get(k).tokenTypeIds);
                assertArrayEquals(where, ints(want.get(k).get("word_ids")), got.get(k).wordIds);
                assertTrue(where, Arrays.equals(bools(want.get(k).get("max_context")), got.get(k).maxContext));
            }
        }
        assertTrue("no question spans several windows", multi > 0);
    }

    @Test
    public void noSpanWhenEveryCandidateIsOutsideTheContext() {
        SpanDecoder.Words words = SpanDecoder.splitWords("alpha beta");
        // [CLS] q [SEP] alpha beta [SEP]: the logits peak on the question and [SEP] only
        SpanDecoder.Window w = SpanDecoder.Window.of(new int[] {2, 10, 3, 11, 12, 3},
                new int[] {0, 0, 0, 1, 1, 1}, new int[] {-1, -1, -1, 0, 1, -1},
                new boolean[] {false, false, false, true, true, false});
        float[] start = {1f, 5f, 4f, -9f, -9f, 3f};
        float[] end = {2f, 5f, 4f, -9f, -9f, 3f};
        SpanDecoder.Answer a = SpanDecoder.best(words, Collections.singletonList(w),
                Collections.singletonList(start), Collections.singletonList(end), 2, 30);
        assertFalse(a.found());
        assertEquals("", a.text);
        assertEquals(3.0, a.nullScore, 0.0);
        a = SpanDecoder.best(words, Collections.singletonList(w), Collections.singletonList(start),
                Collections.singletonList(end), 6, 30);
        assertEquals("alpha", a.text); // -9 + -9 at (3, 3) is the first of the equal sums
        assertEquals(-18.0, a.score, 0.0);
    }

    @Test
    public void topKKeepsTheLowerIndexOnTies() {
        assertArrayEquals(new int[] {1, 3, 0}, SpanDecoder.topK(new float[] {0f, 2f, -1f, 2f}, 3));
        assertArrayEquals(new int[] {0, 1}, SpanDecoder.topK(new float[] {-0.0f, 0.0f}, 5));
    }

    // --- named entities ----------------------------------------------------------------

    @Test
    public void tagsAndEntitiesMatchPythonOnConllSentences() throws IOException {
        Map<String, Object> fx = load("conll_entities.json");
        String[] labels = strings(fx.get("labels"));
        List<Object> sentences = list(fx.get("sentences"));
        List<Object> expected = list(fx.get("expected"));
        assertEquals(sentences.size(), expected.size());
        int entities = 0;
        int cut = 0;
        for (int e = 0; e < sentences.size(); e++) {
            String[] words = strings(sentences.get(e));
            List<EntityDecoder.Window> windows = new ArrayList<>();
            List<float[][]> logits = new ArrayList<>();
            for (Map<String, Object> f : featuresOf(fx, e)) {
                windows.add(EntityDecoder.Window.of(ints(f.get("input_ids")), ints(f.get("word_ids"))));
                List<Object> rows = list(f.get("logits"));
                float[][] m = new float[rows.size()][];
                for (int t = 0; t < m.length; t++) {
                    m[t] = floats(rows.get(t));
                }
                logits.add(m);
            }
            cut += windows.size() > 1 ? 1 : 0;
            String[] tags = EntityDecoder.tags(words.length, windows, logits, labels);
            Map<String, Object> want = map(expected.get(e));
            assertArrayEquals("sentence " + e, strings(want.get("tags")), tags);
            List<EntityDecoder.Entity> wantEntities = new ArrayList<>();
            for (Object o : list(want.get("entities"))) {
                List<Object> t = list(o);
                wantEntities.add(new EntityDecoder.Entity((String) t.get(0), i32(t.get(1)), i32(t.get(2))));
            }
            assertEquals("sentence " + e, wantEntities, EntityDecoder.decode(tags));
            entities += wantEntities.size();
        }
        assertTrue("too few entities: " + entities, entities >= 40);
        assertTrue("no sentence was cut into windows", cut > 0);
    }

    @Test
    public void windowsMatchPythonOnConllSentences() throws IOException {
        AlbertTokenizer tok = new AlbertTokenizer(TestModels.realModel());
        Map<String, Object> fx = load("conll_entities.json");
        int maxLen = i32(fx.get("max_len"));
        List<Object> sentences = list(fx.get("sentences"));
        for (int e = 0; e < sentences.size(); e++) {
            List<EntityDecoder.Window> got = EntityDecoder.windows(tok, strings(sentences.get(e)), maxLen);
            List<Map<String, Object>> want = featuresOf(fx, e);
            assertEquals("sentence " + e, want.size(), got.size());
            for (int k = 0; k < got.size(); k++) {
                assertArrayEquals("sentence " + e, ints(want.get(k).get("input_ids")), got.get(k).inputIds);
                assertArrayEquals("sentence " + e, ints(want.get(k).get("word_ids")), got.get(k).wordIds);
            }
        }
    }

    @Test
    public void entitiesReadAsSeqevalReadsThem() {
        // seqeval's own docstring example, IOB1 input, and ill-formed sequences
        assertEquals(Arrays.asList(new EntityDecoder.Entity("PER", 0, 1), new EntityDecoder.Entity("LOC", 3, 3)),
                EntityDecoder.entities(new String[] {"B-PER", "I-PER", "O", "B-LOC"}));
        assertArrayEquals(new String[] {"B-ORG", "I-ORG", "B-ORG", "O", "B-PER", "B-LOC"},
                EntityDecoder.iob1ToIob2(new String[] {"I-ORG", "I-ORG", "B-ORG", "O", "I-PER", "I-LOC"}));
        assertEquals(Arrays.asList(new EntityDecoder.Entity("PER", 0, 0), new EntityDecoder.Entity("LOC", 1, 2)),
                EntityDecoder.decode(new String[] {"I-PER", "I-LOC", "I-LOC"}));
        assertEquals(Collections.emptyList(), EntityDecoder.entities(new String[] {"O", "O"}));
    }
}
