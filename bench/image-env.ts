/** How the container image runs node: its Containerfile's ENV (NODE_OPTIONS and the like) and ENTRYPOINT options. */
export interface ImageRuntime {
  readonly env: Readonly<Record<string, string>>;
  readonly nodeArgs: readonly string[];
}

/** A Containerfile's runtime stage (the last one), continuation lines joined. */
function runtimeStage(containerfile: string): string {
  return containerfile.replace(/\\\n\s*/g, " ").split(/^FROM\s/m).at(-1) ?? "";
}

/** The variables ENV sets in a Containerfile's runtime stage: the image runs plugpool with them. */
export function containerfileEnv(containerfile: string): Record<string, string> {
  const runtime = runtimeStage(containerfile);
  const env: Record<string, string> = {};
  for (const [, args = ""] of runtime.matchAll(/^ENV\s+(.*)$/gm)) {
    for (const [, key = "", quoted, bare] of args.matchAll(/(\w+)=(?:"([^"]*)"|(\S*))/g)) env[key] = quoted ?? bare ?? "";
  }
  return env;
}

/**
 * The options the runtime stage's ENTRYPOINT gives node before the script: V8 flags that NODE_OPTIONS refuses.
 * Throws when the ENTRYPOINT is not `["node", …options, "<script>", …]`, so a change there is not measured as
 * something else.
 */
export function containerfileNodeArgs(containerfile: string): string[] {
  const entrypoint = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(runtimeStage(containerfile))?.[1];
  const argv: unknown = entrypoint === undefined ? undefined : JSON.parse(entrypoint);
  // The script is node's first argument that is not an option.
  const script = Array.isArray(argv) ? argv.findIndex((arg, i) => i > 0 && typeof arg === "string" && !arg.startsWith("-")) : -1;
  if (!Array.isArray(argv) || argv[0] !== "node" || script < 1) {
    throw new Error(`the Containerfile's ENTRYPOINT is not ["node", …options, "<script>", …]: ${entrypoint ?? "none"}`);
  }
  return argv.slice(1, script).map(String);
}
