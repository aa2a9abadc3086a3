// The plain-text tables of the CLI (doctor, report): columns padded to their widest cell, two spaces apart.

/** How a column is laid out: padded on the right (text), on the left (numbers), or not at all (a last free column). */
export type ColumnAlign = "left" | "right" | "free";

/** The header and the rows, one line each, without trailing spaces. */
export function renderTable(headers: readonly string[], rows: readonly (readonly string[])[], align: readonly ColumnAlign[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((v, i) => {
        const how = align[i] ?? "left";
        const width = widths[i] ?? 0;
        return how === "free" ? v : how === "right" ? v.padStart(width) : v.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}
