const REDACTED = "[redacted]";

/**
 * A value that must never reach logs, error messages or output. Every way a value is usually turned into
 * text (template literals, `String()`, `JSON.stringify`, `util.inspect`/`console.log`) yields "[redacted]";
 * only `reveal()` hands out the value, at the one place that needs it (the plug client's auth header).
 */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return REDACTED;
  }
}
