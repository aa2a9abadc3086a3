// Device calls are chained with `then` rather than awaited: a Refresh has a call in flight to every device at
// once, and a suspended async function keeps its whole frame (registers, context, promise) alive until the
// device answers, about twice the memory of a `then` and its callbacks.

/** The promise `run` returns, or its synchronous throw as a rejection, so one `then` handles both. */
export function started<T>(run: () => Promise<T>): Promise<T> {
  try {
    return run();
  } catch (error) {
    // Handed on as thrown, whatever it is: the type only tells the linter it is meant as a rejection reason.
    const thrown = error as Error;
    return Promise.reject(thrown);
  }
}
