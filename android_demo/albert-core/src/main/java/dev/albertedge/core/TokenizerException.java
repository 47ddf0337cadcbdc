package dev.albertedge.core;

/**
 * A tokenizer asset or input the tokenizer cannot work with.
 *
 * <p>Unchecked so that Kotlin callers are not forced into try/catch noise, but every
 * message is one line that names the file (or input) and says how to fix it, like the
 * Python side's {@code TokenizerError}.
 */
public final class TokenizerException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public TokenizerException(String message) {
        super(message);
    }

    public TokenizerException(String message, Throwable cause) {
        super(message, cause);
    }
}
