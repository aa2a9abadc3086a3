import type { Leadership } from "../../../src/domain/index.ts";

/** A Leadership the test switches by hand: acting (the default) or passive, with another instance holding it. */
export class FakeLeadership implements Leadership {
  #acting: boolean;
  #holder: string | undefined;
  /** How often `acting()` was asked. */
  asked = 0;

  constructor(acting = true, holder?: string) {
    this.#acting = acting;
    this.#holder = holder;
  }

  acting(): boolean {
    this.asked++;
    return this.#acting;
  }

  holder(): string | undefined {
    return this.#acting ? undefined : this.#holder;
  }

  /** Another instance takes over (undefined: none is known to). */
  lose(holder?: string): void {
    this.#acting = false;
    this.#holder = holder;
  }

  gain(): void {
    this.#acting = true;
    this.#holder = undefined;
  }
}
