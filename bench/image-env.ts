/** The variables ENV sets in a Containerfile's runtime stage (the last one): the image runs plugpool with them. */
export function containerfileEnv(containerfile: string): Record<string, string> {
  const runtime = containerfile.replace(/\\\n\s*/g, " ").split(/^FROM\s/m).at(-1) ?? "";
  const env: Record<string, string> = {};
  for (const [, args = ""] of runtime.matchAll(/^ENV\s+(.*)$/gm)) {
    for (const [, key = "", quoted, bare] of args.matchAll(/(\w+)=(?:"([^"]*)"|(\S*))/g)) env[key] = quoted ?? bare ?? "";
  }
  return env;
}
