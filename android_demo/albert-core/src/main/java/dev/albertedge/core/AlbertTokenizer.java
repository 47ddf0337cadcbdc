package dev.albertedge.core;

import java.io.File;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * ALBERT's tokenizer, a line-for-line port of {@code albert_edge/tokenizer.py} (which
 * matches transformers' {@code AlbertTokenizerFast}); {@code tests/test_android_java.py}
 * checks that both give identical ids on every sentence of SST-2 dev.
 *
 * <p>Per text:
 * <ol>
 *   <li>split out added tokens in the raw text, leftmost then longest: the specials
 *       {@code <pad> <unk> [CLS] [SEP] [MASK]} ({@code [MASK]} also takes the whitespace
 *       before it) and the model's USER_DEFINED pieces; each is its own id;</li>
 *   <li>normalize each remaining segment: {@code ``} and {@code ''} to {@code "}, NFKD,
 *       drop non-spacing marks, lower-case, SentencePiece's precompiled charsmap,
 *       collapse runs of spaces;</li>
 *   <li>spaces become {@code ▁}, prepend {@code ▁} unless present, split before every
 *       {@code ▁};</li>
 *   <li>Viterbi over the pieces' scores per word (pieces ending in digit + comma are
 *       penalised by 100, as transformers' converter does; unknown characters cost
 *       min_score − 10 and consecutive unknowns fuse into one {@code <unk>}).</li>
 * </ol>
 * Positions are counted in code points, as Python does, so characters outside the BMP
 * behave identically.
 */
public final class AlbertTokenizer {
    public static final String PAD = "<pad>";
    public static final String UNK = "<unk>";
    public static final String CLS = "[CLS]";
    public static final String SEP = "[SEP]";
    public static final String MASK = "[MASK]";
    private static final String SPACE_SYMBOL = "\u2581";
    private static final Pattern MULTI_SPACE = Pattern.compile(" {2,}");

    private final SentencePieceModel model;
    private final PrecompiledCharsmap charsmap;
    private final boolean doLowerCase;
    private final boolean keepAccents;
    private final Map<String, Integer> pieceIds = new HashMap<>();
    private final double[] scores;
    private final double unkScore;
    private final int maxPieceCodePoints;
    private final String[] addedTokens; // by code-point length, longest first (stable)
    private final int[] addedTokenIds;
    public final int padId;
    public final int unkId;
    public final int clsId;
    public final int sepId;
    public final int maskId;

    public AlbertTokenizer(SentencePieceModel model) {
        this(model, true, false);
    }

    public AlbertTokenizer(SentencePieceModel model, boolean doLowerCase, boolean keepAccents) {
        this.model = model;
        this.doLowerCase = doLowerCase;
        this.keepAccents = keepAccents;
        byte[] blob = model.precompiledCharsmap();
        try {
            this.charsmap = blob.length == 0 ? null : new PrecompiledCharsmap(blob);
        } catch (IllegalArgumentException e) {
            throw new TokenizerException(
                    model.source() + ": corrupt normalizer rules (" + e.getMessage()
                            + "); replace it with the checkpoint's original spiece.model",
                    e);
        }
        int n = model.size();
        scores = new double[n];
        double minScore = Double.POSITIVE_INFINITY;
        int maxLen = 1;
        List<String> added = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String piece = model.piece(i);
            double score = model.score(i);
            int len = piece.codePointCount(0, piece.length());
            if (len >= 2 && piece.endsWith(",")) {
                int before = piece.codePointBefore(piece.length() - 1);
                if (PythonChars.isDigit(before)) {
                    score -= 100.0;
                }
            }
            scores[i] = score;
            if (!pieceIds.containsKey(piece)) {
                pieceIds.put(piece, i);
                minScore = Math.min(minScore, score);
            }
            maxLen = Math.max(maxLen, len);
            if (model.type(i) == SentencePieceModel.USER_DEFINED) {
                added.add(piece);
            }
        }
        unkScore = minScore - 10.0;
        maxPieceCodePoints = maxLen;

        String[] specials = {PAD, UNK, CLS, SEP, MASK};
        int[] specialIds = new int[specials.length];
        List<String> missing = new ArrayList<>();
        for (int k = 0; k < specials.length; k++) {
            Integer id = pieceIds.get(specials[k]);
            if (id == null) {
                missing.add(specials[k]);
            } else {
                specialIds[k] = id;
            }
        }
        if (!missing.isEmpty()) {
            throw new TokenizerException(
                    model.source() + ": SentencePiece model lacks ALBERT's special pieces "
                            + missing + "; is this an ALBERT spiece.model?");
        }
        padId = specialIds[0];
        unkId = specialIds[1];
        clsId = specialIds[2];
        sepId = specialIds[3];
        maskId = specialIds[4];

        List<String> all = new ArrayList<>(Arrays.asList(specials));
        for (String a : added) {
            if (!all.contains(a)) {
                all.add(a);
            }
        }
        // Stable sort by code-point length, longest first: the Python regex alternation order.
        List<String> sorted = new ArrayList<>(all);
        java.util.Collections.sort(sorted, (a, b) -> Integer.compare(
                b.codePointCount(0, b.length()), a.codePointCount(0, a.length())));
        addedTokens = sorted.toArray(new String[0]);
        addedTokenIds = new int[addedTokens.length];
        for (int k = 0; k < addedTokens.length; k++) {
            addedTokenIds[k] = pieceIds.get(addedTokens[k]);
        }
    }

    /** Loads a {@code spiece.model} file from disk. */
    public static AlbertTokenizer load(File spieceModel) {
        return new AlbertTokenizer(SentencePieceModel.load(spieceModel));
    }

    public SentencePieceModel model() {
        return model;
    }

    public int vocabSize() {
        return model.size();
    }

    /** Normalizes one segment (text between added tokens). */
    public String normalize(String segment) {
        String text = unicodeSteps(segment.replace("``", "\"").replace("''", "\""));
        if (charsmap != null) {
            text = charsmap.normalize(text);
        }
        return MULTI_SPACE.matcher(text).replaceAll(" ");
    }

    /**
     * The steps that use the platform's Unicode database (NFKD, dropping non-spacing
     * marks, lower-casing), as opposed to the model's own rules: where the JVM's or
     * Android's Unicode version differs from Python's, only these can differ.
     */
    String unicodeSteps(String text) {
        if (!keepAccents) {
            text = Normalizer.normalize(text, Normalizer.Form.NFKD);
            StringBuilder sb = new StringBuilder(text.length());
            for (int i = 0; i < text.length(); ) {
                int cp = text.codePointAt(i);
                if (Character.getType(cp) != Character.NON_SPACING_MARK) {
                    sb.appendCodePoint(cp);
                }
                i += Character.charCount(cp);
            }
            text = sb.toString();
        }
        if (doLowerCase) {
            text = text.toLowerCase(Locale.ROOT);
        }
        return text;
    }

    /** Piece ids of one text, without {@code [CLS]}/{@code [SEP]}. */
    public int[] tokenizeIds(String text) {
        IntList ids = new IntList();
        int pos = 0;
        int i = 0;
        int n = text.length();
        while (i < n) {
            int matchEnd = -1;
            int matchId = -1;
            for (int k = 0; k < addedTokens.length; k++) {
                String tok = addedTokens[k];
                int from = i;
                if (tok.equals(MASK)) {
                    while (from < n) {
                        int cp = text.codePointAt(from);
                        if (!PythonChars.isSpace(cp)) {
                            break;
                        }
                        from += Character.charCount(cp);
                    }
                }
                if (text.startsWith(tok, from)) {
                    matchEnd = from + tok.length();
                    matchId = addedTokenIds[k];
                    break;
                }
            }
            if (matchEnd >= 0) {
                segmentIds(text.substring(pos, i), ids);
                ids.add(matchId);
                pos = matchEnd;
                i = matchEnd;
            } else {
                i += Character.charCount(text.codePointAt(i));
            }
        }
        segmentIds(text.substring(pos), ids);
        return ids.toArray();
    }

    private void segmentIds(String segment, IntList out) {
        if (segment.isEmpty()) {
            return;
        }
        String text = normalize(segment).replace(" ", SPACE_SYMBOL);
        if (text.isEmpty()) {
            return;
        }
        if (!text.startsWith(SPACE_SYMBOL)) {
            text = SPACE_SYMBOL + text;
        }
        int start = 0;
        while (start < text.length()) {
            int next = text.indexOf(SPACE_SYMBOL, start + 1);
            int end = next < 0 ? text.length() : next;
            viterbi(text.substring(start, end), out);
            start = end;
        }
    }

    /** Best segmentation of one {@code ▁}-prefixed word under the unigram scores. */
    private void viterbi(String word, IntList out) {
        int n = word.codePointCount(0, word.length());
        int[] offsets = new int[n + 1];
        for (int k = 0, off = 0; k < n; k++) {
            offsets[k] = off;
            off += Character.charCount(word.codePointAt(off));
            offsets[k + 1] = off;
        }
        double[] best = new double[n + 1];
        boolean[] reached = new boolean[n + 1];
        int[] backStart = new int[n + 1];
        int[] backId = new int[n + 1];
        reached[0] = true;
        for (int start = 0; start < n; start++) {
            if (!reached[start]) {
                continue;
            }
            double base = best[start];
            boolean single = false;
            int last = Math.min(n, start + maxPieceCodePoints);
            for (int end = start + 1; end <= last; end++) {
                Integer id = pieceIds.get(word.substring(offsets[start], offsets[end]));
                if (id == null) {
                    continue;
                }
                single = single || end == start + 1;
                double cand = base + scores[id];
                if (!reached[end] || cand > best[end]) {
                    best[end] = cand;
                    reached[end] = true;
                    backStart[end] = start;
                    backId[end] = id;
                }
            }
            if (!single) {
                double cand = base + unkScore;
                int end = start + 1;
                if (!reached[end] || cand > best[end]) {
                    best[end] = cand;
                    reached[end] = true;
                    backStart[end] = start;
                    backId[end] = unkId;
                }
            }
        }
        IntList reversed = new IntList();
        int end = n;
        while (end > 0) {
            int piece = backId[end];
            if (!(piece == unkId && reversed.size() > 0 && reversed.last() == unkId)) {
                reversed.add(piece);
            }
            end = backStart[end];
        }
        for (int k = reversed.size() - 1; k >= 0; k--) {
            out.add(reversed.get(k));
        }
    }

    /** {@link #encode(String, String, int, boolean, boolean)} with max length 512, no padding. */
    public Encoding encode(String text) {
        return encode(text, null, 512, true, false);
    }

    /**
     * {@code [CLS] a [SEP] (b [SEP])} with token types 0/1.
     *
     * @param pair second segment, or null
     * @param maxLength longest result in tokens (specials included); 0 for no limit
     * @param truncation drop tokens to fit, transformers' "longest_first" (from the end
     *     of the longer segment, the first one on ties); when false an over-long input
     *     throws
     * @param padToMaxLength pad with {@code <pad>} to exactly {@code maxLength}
     */
    public Encoding encode(
            String text, String pair, int maxLength, boolean truncation, boolean padToMaxLength) {
        return build(tokenizeIds(text), pair != null ? tokenizeIds(pair) : null, maxLength,
                truncation, padToMaxLength);
    }

    private Encoding build(
            int[] a, int[] b, int maxLength, boolean truncation, boolean padToMaxLength) {
        int la = a.length;
        int lb = b != null ? b.length : 0;
        boolean truncated = false;
        if (maxLength > 0) {
            int budget = maxLength - (b != null ? 3 : 2);
            if (budget < 0) {
                throw new TokenizerException(
                        "max_length=" + maxLength + " leaves no room for a token");
            }
            int over = la + lb - budget;
            if (over > 0 && !truncation) {
                throw new TokenizerException(
                        "text is " + (over + budget + 2) + " tokens, longer than max_length="
                                + maxLength + "; shorten it or allow truncation");
            }
            truncated = over > 0;
            while (over > 0) {
                if (b != null && lb > la) {
                    lb--;
                } else {
                    la--;
                }
                over--;
            }
        } else if (padToMaxLength) {
            throw new TokenizerException("padding to max_length needs max_length > 0");
        }
        int length = la + 2 + (b != null ? lb + 1 : 0);
        int width = padToMaxLength ? maxLength : length;
        int[] ids = new int[width];
        int[] mask = new int[width];
        int[] types = new int[width];
        int p = 0;
        ids[p++] = clsId;
        for (int k = 0; k < la; k++) {
            ids[p++] = a[k];
        }
        ids[p++] = sepId;
        if (b != null) {
            int firstB = p;
            for (int k = 0; k < lb; k++) {
                ids[p++] = b[k];
            }
            ids[p++] = sepId;
            for (int k = firstB; k < p; k++) {
                types[k] = 1;
            }
        }
        for (int k = 0; k < length; k++) {
            mask[k] = 1;
        }
        for (int k = length; k < width; k++) {
            ids[k] = padId;
        }
        return new Encoding(ids, mask, types, length, truncated);
    }

    /**
     * Encodes {@code text} for a model with several fixed sequence lengths ("buckets"):
     * the smallest bucket that holds every token, or the largest one (truncating) when none
     * does; padded to that bucket.
     */
    public Encoding encodeForBuckets(String text, int[] buckets) {
        int[] ids = tokenizeIds(text);
        return build(ids, null, SequenceBuckets.pick(buckets, ids.length + 2), true, true);
    }

    /** The pieces of {@code ids} (for display and debugging). */
    public String[] pieces(int[] ids) {
        String[] out = new String[ids.length];
        for (int k = 0; k < ids.length; k++) {
            out[k] = ids[k] >= 0 && ids[k] < model.size() ? model.piece(ids[k]) : "?";
        }
        return out;
    }

    /** A growable int array (avoids boxing on the tokenization path). */
    static final class IntList {
        private int[] data = new int[32];
        private int size;

        void add(int v) {
            if (size == data.length) {
                data = Arrays.copyOf(data, size * 2);
            }
            data[size++] = v;
        }

        int size() {
            return size;
        }

        int get(int k) {
            return data[k];
        }

        int last() {
            return data[size - 1];
        }

        int[] toArray() {
            return Arrays.copyOf(data, size);
        }
    }
}
