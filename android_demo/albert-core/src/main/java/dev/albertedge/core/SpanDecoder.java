package dev.albertedge.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;

/**
 * Extractive question answering: a question and its context → model windows → the best
 * answer span. The port of {@code albert_edge/tasks/squad.py} ({@code encode_squad},
 * {@code best_spans}); {@code tests/test_android_java_tasks.py} holds the two to the same
 * windows, span texts and scores, bit for bit, on real SQuAD questions.
 *
 * <p>Windows: the context is split on whitespace into words, each word after the first
 * tokenized with the space before it (so the pieces are the whole context's, as squad.py
 * and transformers' run_qa.py have them); the question keeps at most
 * {@code min(64, maxLen / 2)} pieces; a context longer than one window is cut into windows that overlap by {@code stride} tokens (at most half a
 * window), each {@code [CLS] question [SEP] window [SEP]}. Each context token is marked in
 * the window where it has the most context (BERT's {@code _check_is_max_context}).
 *
 * <p>Decoding: in each window the {@code nBest} highest start and end logits (ties: the
 * lower index first); a span counts where both ends lie in the context, the end is not
 * before the start, it is at most {@code maxAnswerLength} tokens and its start is in its
 * max-context window; its score is start + end logit (in double), and the best over all
 * windows wins (the first on a tie). Its text runs from the start word to the end of the
 * end word of the original context. The null score is the smallest [CLS] start + end
 * over the windows (SQuAD v2.0's "no answer").
 */
public final class SpanDecoder {
    private SpanDecoder() {}

    /** The default overlap between windows, as squad.py's {@code DEFAULT_STRIDE}. */
    public static final int DEFAULT_STRIDE = 128;
    /** squad.py's {@code MAX_QUERY_LENGTH}: question pieces kept. */
    public static final int MAX_QUERY_LENGTH = 64;
    /** squad.py's {@code N_BEST}. */
    public static final int N_BEST = 20;
    /** squad.py's {@code MAX_ANSWER_LENGTH} (tokens). */
    public static final int MAX_ANSWER_LENGTH = 30;

    /** A context split on whitespace: its words and each word's offset (UTF-16 units). */
    public static final class Words {
        public final String context;
        public final String[] words;
        public final int[] starts;

        Words(String context, String[] words, int[] starts) {
            this.context = context;
            this.words = words;
            this.starts = starts;
        }

        /** The context from word {@code first} to the end of word {@code last}. */
        public String span(int first, int last) {
            return context.substring(starts[first], starts[last] + words[last].length());
        }

        /** Offset just past word {@code last}. */
        public int end(int last) {
            return starts[last] + words[last].length();
        }
    }

    /** One model input: ids, segment ids, each token's context word (-1 outside the
     * context) and whether this window is the token's max-context one. */
    public static final class Window {
        public final int[] inputIds;
        public final int[] tokenTypeIds;
        public final int[] wordIds;
        public final boolean[] maxContext;

        Window(int[] inputIds, int[] tokenTypeIds, int[] wordIds, boolean[] maxContext) {
            this.inputIds = inputIds;
            this.tokenTypeIds = tokenTypeIds;
            this.wordIds = wordIds;
            this.maxContext = maxContext;
        }

        public static Window of(int[] inputIds, int[] tokenTypeIds, int[] wordIds, boolean[] maxContext) {
            int n = inputIds.length;
            if (tokenTypeIds.length != n || wordIds.length != n || maxContext.length != n) {
                throw new IllegalArgumentException("window arrays differ in length");
            }
            return new Window(inputIds, tokenTypeIds, wordIds, maxContext);
        }

        public int length() {
            return inputIds.length;
        }
    }

    /** The best span: its text, first and last word, character range, score and the
     * null score. {@link #found()} is false when no window had a valid span. */
    public static final class Answer {
        public final String text;
        public final int firstWord;
        public final int lastWord;
        public final int charStart;
        public final int charEnd;
        public final double score;
        public final double nullScore;

        Answer(String text, int firstWord, int lastWord, int charStart, int charEnd,
                double score, double nullScore) {
            this.text = text;
            this.firstWord = firstWord;
            this.lastWord = lastWord;
            this.charStart = charStart;
            this.charEnd = charEnd;
            this.score = score;
            this.nullScore = nullScore;
        }

        public boolean found() {
            return firstWord >= 0;
        }

        @Override
        public String toString() {
            return found() ? String.format("%s (score %.4f)", text, score) : "(no span)";
        }
    }

    private static boolean isSpace(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\u202F';
    }

    /** Whitespace-separated words of {@code context} (squad.py's {@code split_words}). */
    public static Words splitWords(String context) {
        List<String> words = new ArrayList<>();
        AlbertTokenizer.IntList starts = new AlbertTokenizer.IntList();
        StringBuilder cur = null;
        for (int i = 0; i < context.length(); i++) {
            char c = context.charAt(i);
            if (isSpace(c)) {
                if (cur != null) {
                    words.add(cur.toString());
                    cur = null;
                }
                continue;
            }
            if (cur == null) {
                cur = new StringBuilder();
                starts.add(i);
            }
            cur.append(c);
        }
        if (cur != null) {
            words.add(cur.toString());
        }
        return new Words(context, words.toArray(new String[0]), starts.toArray());
    }

    /** The windows of one question over its context (squad.py's {@code encode_squad}).
     * {@code stride}: tokens of overlap, at most half a window. */
    public static List<Window> windows(
            AlbertTokenizer tokenizer, String question, Words context, int maxLen, int stride) {
        int[] q = tokenizer.tokenizeIds(question);
        q = Arrays.copyOf(q, Math.min(q.length, Math.max(1, Math.min(MAX_QUERY_LENGTH, maxLen / 2))));
        AlbertTokenizer.IntList doc = new AlbertTokenizer.IntList();
        AlbertTokenizer.IntList tokWord = new AlbertTokenizer.IntList();
        for (int w = 0; w < context.words.length; w++) {
            // a word after the first keeps the space before it: the pieces of the whole
            // context (a word opening with "(" or a quote keeps its lone "\u2581")
            int[] pieces = tokenizer.tokenizeIds(w == 0 ? context.words[w] : " " + context.words[w]);
            if (pieces.length == 0) {
                pieces = new int[] {tokenizer.unkId};
            }
            for (int p : pieces) {
                doc.add(p);
                tokWord.add(w);
            }
        }
        int window = maxLen - q.length - 3;
        if (window < 1) {
            throw new IllegalArgumentException("the question takes " + q.length + " of " + maxLen
                    + " tokens; no room for its context");
        }
        int overlap = Math.min(stride, window / 2);
        int step = Math.max(1, window - overlap);
        int n = doc.size();
        List<int[]> spans = new ArrayList<>();
        int start = 0;
        while (true) {
            int length = Math.min(window, n - start);
            spans.add(new int[] {start, length});
            if (start + length >= n) {
                break;
            }
            start += step;
        }
        int[] home = bestWindows(spans, n);
        List<Window> out = new ArrayList<>();
        int offset = q.length + 2;
        for (int k = 0; k < spans.size(); k++) {
            int s = spans.get(k)[0];
            int length = spans.get(k)[1];
            int total = offset + length + 1;
            int[] ids = new int[total];
            int[] types = new int[total];
            int[] wid = new int[total];
            boolean[] best = new boolean[total];
            Arrays.fill(wid, -1);
            ids[0] = tokenizer.clsId;
            System.arraycopy(q, 0, ids, 1, q.length);
            ids[q.length + 1] = tokenizer.sepId;
            for (int i = 0; i < length; i++) {
                ids[offset + i] = doc.get(s + i);
                types[offset + i] = 1;
                wid[offset + i] = tokWord.get(s + i);
                best[offset + i] = home[s + i] == k;
            }
            ids[total - 1] = tokenizer.sepId;
            types[total - 1] = 1;
            out.add(new Window(ids, types, wid, best));
        }
        return out;
    }

    /** For each of {@code n} context tokens, the window where it has the most context. */
    private static int[] bestWindows(List<int[]> spans, int n) {
        int[] best = new int[n];
        double[] score = new double[n];
        Arrays.fill(best, -1);
        for (int k = 0; k < spans.size(); k++) {
            int s = spans.get(k)[0];
            int length = spans.get(k)[1];
            int end = s + length - 1;
            for (int pos = s; pos < s + length; pos++) {
                double v = Math.min(pos - s, end - pos) + 0.01 * length;
                if (best[pos] < 0 || v > score[pos]) {
                    best[pos] = k;
                    score[pos] = v;
                }
            }
        }
        return best;
    }

    /** Indices of the {@code k} largest values, largest first, the lower index first on a
     * tie (numpy's stable argsort of the negated values). */
    static int[] topK(final float[] values, int k) {
        Integer[] order = new Integer[values.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Collections.sort(Arrays.asList(order), new Comparator<Integer>() {
            @Override
            public int compare(Integer a, Integer b) {
                float x = values[a];
                float y = values[b];
                return x > y ? -1 : (x < y ? 1 : 0);
            }
        });
        int m = Math.min(k, order.length);
        int[] out = new int[m];
        for (int i = 0; i < m; i++) {
            out[i] = order[i];
        }
        return out;
    }

    /** The best span over {@code windows} of one question (squad.py's {@code best_spans}):
     * {@code startLogits.get(i)} and {@code endLogits.get(i)} are window i's, at least its
     * length long (padding beyond it is ignored). */
    public static Answer best(Words context, List<Window> windows, List<float[]> startLogits,
            List<float[]> endLogits, int nBest, int maxAnswerLength) {
        if (windows.size() != startLogits.size() || windows.size() != endLogits.size()) {
            throw new IllegalArgumentException("one start and one end logit vector per window");
        }
        double score = Double.NEGATIVE_INFINITY;
        double nul = Double.POSITIVE_INFINITY;
        int first = -1;
        int last = -1;
        for (int f = 0; f < windows.size(); f++) {
            Window win = windows.get(f);
            int n = win.length();
            float[] start = startLogits.get(f);
            float[] end = endLogits.get(f);
            if (start.length < n || end.length < n) {
                throw new IllegalArgumentException("window " + f + " has " + n
                        + " tokens but " + Math.min(start.length, end.length) + " logits");
            }
            start = Arrays.copyOf(start, n);
            end = Arrays.copyOf(end, n);
            nul = Math.min(nul, (double) start[0] + (double) end[0]);
            int[] starts = topK(start, nBest);
            int[] ends = topK(end, nBest);
            for (int s : starts) {
                if (win.wordIds[s] < 0 || !win.maxContext[s]) {
                    continue;
                }
                for (int t : ends) {
                    if (win.wordIds[t] < 0 || t < s || t - s + 1 > maxAnswerLength) {
                        continue;
                    }
                    double cand = (double) start[s] + (double) end[t];
                    if (cand > score) {
                        score = cand;
                        first = win.wordIds[s];
                        last = win.wordIds[t];
                    }
                }
            }
        }
        if (first < 0) {
            return new Answer("", -1, -1, -1, -1, score, nul);
        }
        return new Answer(context.span(first, last), first, last, context.starts[first],
                context.end(last), score, nul);
    }

    /** {@link #best} at squad.py's defaults (n-best 20, answers of at most 30 tokens). */
    public static Answer best(Words context, List<Window> windows, List<float[]> startLogits,
            List<float[]> endLogits) {
        return best(context, windows, startLogits, endLogits, N_BEST, MAX_ANSWER_LENGTH);
    }
}
