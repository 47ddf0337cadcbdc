package dev.albertedge.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Named entities from a token-classification head: words → model windows → one tag per
 * word → IOB2 entities. The port of {@code albert_edge/tasks/tokens.py}
 * ({@code encode_tokens}, {@code predict_tags}, {@code iob1_to_iob2}) and of seqeval's
 * {@code get_entities} (default mode), the entity extraction that {@code tasks.score}
 * counts; {@code tests/test_android_java_tasks.py} holds the two to the same windows, tags
 * and entities on synthetic CoNLL-2003-style sentences.
 *
 * <p>Each word is tokenized on its own; a sentence longer than {@code maxLen - 2} pieces is
 * cut into consecutive windows at word boundaries (a single word longer than a window keeps
 * its first pieces), so every word is predicted exactly once, from the argmax of the
 * logits on its first piece (the first largest on a tie). Predicted tags are converted to
 * IOB2 before the entities are read off, as the metric does.
 */
public final class EntityDecoder {
    private EntityDecoder() {}

    /** One model input: ids, and for each token the word it starts (-1 for [CLS], [SEP]
     * and a word's later pieces). */
    public static final class Window {
        public final int[] inputIds;
        public final int[] wordIds;

        Window(int[] inputIds, int[] wordIds) {
            this.inputIds = inputIds;
            this.wordIds = wordIds;
        }

        public static Window of(int[] inputIds, int[] wordIds) {
            if (inputIds.length != wordIds.length) {
                throw new IllegalArgumentException("window arrays differ in length");
            }
            return new Window(inputIds, wordIds);
        }

        public int length() {
            return inputIds.length;
        }
    }

    /** An entity: its type and its first and last word (inclusive). */
    public static final class Entity {
        public final String type;
        public final int first;
        public final int last;

        public Entity(String type, int first, int last) {
            this.type = type;
            this.first = first;
            this.last = last;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Entity)) {
                return false;
            }
            Entity e = (Entity) o;
            return type.equals(e.type) && first == e.first && last == e.last;
        }

        @Override
        public int hashCode() {
            return (type.hashCode() * 31 + first) * 31 + last;
        }

        @Override
        public String toString() {
            return "(" + type + ", " + first + ", " + last + ")";
        }
    }

    /** The windows of one sentence (tokens.py's {@code encode_tokens}). */
    public static List<Window> windows(AlbertTokenizer tokenizer, String[] words, int maxLen) {
        int budget = maxLen - 2;
        if (budget < 1) {
            throw new IllegalArgumentException("maxLen " + maxLen + " leaves no room for a word");
        }
        int[][] pieces = new int[words.length][];
        for (int w = 0; w < words.length; w++) {
            pieces[w] = tokenizer.tokenizeIds(words[w]);
            if (pieces[w].length == 0) {
                pieces[w] = new int[] {tokenizer.unkId};
            }
        }
        List<Window> out = new ArrayList<>();
        int w = 0;
        while (w < words.length) {
            AlbertTokenizer.IntList ids = new AlbertTokenizer.IntList();
            AlbertTokenizer.IntList wid = new AlbertTokenizer.IntList();
            ids.add(tokenizer.clsId);
            wid.add(-1);
            while (w < words.length
                    && (ids.size() - 1 + pieces[w].length <= budget || ids.size() == 1)) {
                int n = Math.min(pieces[w].length, budget);
                for (int i = 0; i < n; i++) {
                    ids.add(pieces[w][i]);
                    wid.add(i == 0 ? w : -1);
                }
                w++;
            }
            ids.add(tokenizer.sepId);
            wid.add(-1);
            out.add(new Window(ids.toArray(), wid.toArray()));
        }
        return out;
    }

    /** Each word's tag: the label of the largest logit on its first piece (tokens.py's
     * {@code predict_tags}); "O" for a word no window predicts and for an index past
     * {@code labels}. {@code logits.get(i)[t]} are window i's scores at token t. */
    public static String[] tags(int numWords, List<Window> windows, List<float[][]> logits,
            String[] labels) {
        if (windows.size() != logits.size()) {
            throw new IllegalArgumentException("one logits matrix per window");
        }
        String[] out = new String[numWords];
        Arrays.fill(out, "O");
        for (int f = 0; f < windows.size(); f++) {
            Window win = windows.get(f);
            float[][] rows = logits.get(f);
            if (rows.length < win.length()) {
                throw new IllegalArgumentException("window " + f + " has " + win.length()
                        + " tokens but " + rows.length + " rows of logits");
            }
            for (int t = 0; t < win.length(); t++) {
                int w = win.wordIds[t];
                if (w < 0) {
                    continue;
                }
                int arg = argmax(rows[t]);
                out[w] = arg < labels.length ? labels[arg] : "O";
            }
        }
        return out;
    }

    /** The first index of the largest value (numpy's argmax). */
    static int argmax(float[] row) {
        if (row.length == 0) {
            throw new IllegalArgumentException("an empty row of logits");
        }
        int best = 0;
        for (int i = 1; i < row.length; i++) {
            if (row[i] > row[best]) {
                best = i;
            }
        }
        return best;
    }

    /** IOB2 tags: an {@code I-X} after anything but an {@code X} tag becomes {@code B-X}
     * (tokens.py's {@code iob1_to_iob2}; IOB2 tags pass unchanged). */
    public static String[] iob1ToIob2(String[] tags) {
        String[] out = new String[tags.length];
        String prev = "O";
        for (int i = 0; i < tags.length; i++) {
            String tag = tags[i];
            if (tag.startsWith("I-") && (prev.equals("O") || !suffix(prev).equals(tag.substring(2)))) {
                tag = "B-" + tag.substring(2);
            }
            out[i] = tag;
            prev = tag;
        }
        return out;
    }

    private static String suffix(String tag) {
        return tag.length() >= 2 ? tag.substring(2) : "";
    }

    /** The entities of an IOB2 (or IOBES) tag sequence, as seqeval's {@code get_entities}
     * (default mode) reads them. */
    public static List<Entity> entities(String[] tags) {
        List<Entity> chunks = new ArrayList<>();
        char prevTag = 'O';
        String prevType = "";
        int begin = 0;
        for (int i = 0; i <= tags.length; i++) {
            String chunk = i < tags.length ? tags[i] : "O";
            char tag = chunk.isEmpty() ? 'O' : chunk.charAt(0);
            String rest = chunk.isEmpty() ? "" : chunk.substring(1);
            int dash = rest.indexOf('-');
            String type = dash >= 0 ? rest.substring(dash + 1) : rest;
            if (type.isEmpty()) {
                type = "_";
            }
            if (endOfChunk(prevTag, tag, prevType, type)) {
                chunks.add(new Entity(prevType, begin, i - 1));
            }
            if (startOfChunk(prevTag, tag, prevType, type)) {
                begin = i;
            }
            prevTag = tag;
            prevType = type;
        }
        return chunks;
    }

    /** {@link #entities} of the sentence's tags after {@link #iob1ToIob2}. */
    public static List<Entity> decode(String[] tags) {
        return entities(iob1ToIob2(tags));
    }

    private static boolean endOfChunk(char prev, char tag, String prevType, String type) {
        return prev == 'E'
                || prev == 'S'
                || (prev == 'B' || prev == 'I') && (tag == 'B' || tag == 'S' || tag == 'O')
                || prev != 'O' && prev != '.' && !prevType.equals(type);
    }

    private static boolean startOfChunk(char prev, char tag, String prevType, String type) {
        return tag == 'B'
                || tag == 'S'
                || (prev == 'E' || prev == 'S' || prev == 'O') && (tag == 'E' || tag == 'I')
                || tag != 'O' && tag != '.' && !prevType.equals(type);
    }
}
