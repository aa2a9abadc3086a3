// The reconciler's passes answer "how long until something is left to do": the soonest of their parts' waits.

/** The smallest of the waits that are set, or undefined when none is (nothing left to do). */
export function soonest(waits: readonly (number | undefined)[]): number | undefined {
  const set = waits.filter((w) => w !== undefined);
  return set.length === 0 ? undefined : Math.min(...set);
}
