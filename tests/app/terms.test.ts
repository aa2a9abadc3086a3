// The terms of a leader-elected plugpool: a fresh pool each time the Lease is won, ended the moment it is lost,
// and cluster-autoscaler answered by the acting term's pool only.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Leadership } from "../../src/domain/index.ts";
import type { LeaderLease } from "../../src/adapters/kubernetes/leader-lease.ts";
import { currentPool, followTerms, type Term } from "../../src/app/terms.ts";
import { createLogger } from "../../src/app/logger.ts";
import { World } from "../harness/fakes/world.ts";
import { rejectsWith, throwsWith } from "../harness/fakes/assertions.ts";
import { eventually } from "../harness/eventually.ts";

/** A Lease the test wins and loses by hand; each win is a new term. */
class FakeLease implements LeaderLease {
  #acting = false;
  #term = 0;
  #holder: string | undefined;
  changed: () => void = () => undefined;

  acting(): boolean {
    return this.#acting;
  }
  holder(): string | undefined {
    return this.#acting ? undefined : this.#holder;
  }
  term(): number {
    return this.#term;
  }
  start(): Promise<void> {
    return Promise.resolve();
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
  win(): void {
    this.#acting = true;
    this.#term++;
    this.changed();
  }
  lose(holder: string): void {
    this.#acting = false;
    this.#holder = holder;
    this.changed();
  }
}

interface Built {
  readonly leadership: Leadership;
  readonly world: World;
  stopped: "no" | "flushed" | "dropped";
}

function setUp(slowBuild?: Promise<void>, failures = 0) {
  const lease = new FakeLease();
  const built: Built[] = [];
  let failing = failures;
  const build = async (leadership: Leadership): Promise<Term> => {
    if (failing-- > 0) throw new Error("reading ConfigMap plugpool/plugpool-records failed, the apiserver did not answer");
    const world = new World({ leadership });
    const entry: Built = { leadership, world, stopped: "no" };
    built.push(entry);
    await slowBuild;
    return {
      pool: world.pool,
      runner: { wake: () => undefined, stop: () => Promise.resolve(), lastProgress: () => undefined, stalledFor: () => 0 },
      stop: (flush) => {
        entry.stopped = flush ? "flushed" : "dropped";
        return Promise.resolve();
      },
    };
  };
  const terms = followTerms(lease, build, createLogger({ level: "error", silent: true }), 10);
  lease.changed = () => {
    terms.changed();
  };
  return { lease, built, terms, pool: currentPool(() => terms.current()?.pool, lease) };
}

describe("followTerms()", () => {
  it("builds a fresh pool each time the Lease is won and drops the last one's unwritten records the moment it is lost", async () => {
    const { lease, built, terms, pool } = setUp();
    lease.win();
    await terms.settled();
    const [first] = built;
    assert.ok(first !== undefined && built.length === 1);
    assert.equal(terms.current()?.pool, first.world.pool);
    assert.equal(first.leadership.acting(), true);
    assert.deepEqual(pool.nodeGroups().map((g) => g.id), ["workers"]);

    lease.lose("pod-b_2");
    assert.equal(terms.current(), undefined, "passive at once, before the term is ended");
    throwsWith(() => pool.nodeGroups(), "not-leader", /the acting plugpool is pod-b_2/);
    await terms.settled();
    assert.equal(first.stopped, "dropped");

    lease.win();
    await terms.settled();
    const second = built[1];
    assert.ok(second !== undefined, "a new term builds a new pool");
    assert.equal(first.leadership.acting(), false, "the first term's pool never acts again");
    assert.equal(second.leadership.acting(), true);
    await terms.stop();
    assert.equal(second.stopped, "flushed");
  });

  it("ends a term lost while its records were read before it ever answers", async () => {
    const reading = Promise.withResolvers<undefined>();
    const { lease, built, terms, pool } = setUp(reading.promise.then(() => undefined));
    lease.win();
    while (built.length === 0) await new Promise((r) => setImmediate(r));
    lease.lose("pod-b_2");
    reading.resolve(undefined);
    await terms.settled();
    assert.equal(built[0]?.stopped, "dropped");
    assert.equal(terms.current(), undefined);
    await rejectsWith(pool.increaseSize("workers", 1), "not-leader");
  });

  it("tries a term whose records could not be read again while it lasts, rather than hold the Lease without a pool", async () => {
    const { lease, built, terms } = setUp(undefined, 2);
    lease.win();
    await eventually("the term started", () => {
      assert.ok(terms.current() !== undefined);
    });
    assert.equal(built.length, 1);
    await terms.stop();
  });

  it("answers the reports empty and runs no pass while passive", async () => {
    const { pool } = setUp();
    assert.deepEqual([pool.quarantine(), pool.poweredOutside(), pool.usage()], [[], [], []]);
    assert.equal(await pool.reconcile(), undefined);
    throwsWith(() => pool.instances("workers"), "not-leader", /no other plugpool is known to act/);
  });
});
