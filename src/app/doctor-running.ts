// What doctor can learn from a plugpool already serving beside it (same pod: `kubectl exec … doctor`): the
// quarantine lives in that process's memory, so it is read from its /metrics.
import { createHttpClient, describeOrigin, readAnswer } from "../adapters/http-device/http-client.ts";
import type { AppConfig } from "./config/index.ts";

export interface RunningRow {
  readonly area: "running";
  readonly subject: string;
  readonly status: "ok" | "warn";
  readonly detail: string;
}

const QUARANTINED = /^plugpool_quarantined_machines\{machine="([^"]+)"\} (\d+)/gm;
const INSTANCES = /^plugpool_instances\{group="([^"]+)",state="([^"]+)"\} (\d+)/gm;
const DRY_RUN = /^plugpool_dry_run 1$/m;

/** plugpool's /metrics is a few KB per machine; more is not its answer, and not worth the memory. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** The ops address to ask: a wildcard listen address is reached on loopback. */
export function opsUrl(config: AppConfig): string {
  const { host, port } = config.opsListen;
  const reach = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "[::1]" : host.includes(":") ? `[${host}]` : host;
  return `http://${reach}:${port}/metrics`;
}

/**
 * Reads the running instance's metrics (within `timeoutMs`) and reports its instances and every quarantined
 * machine. Nothing answering is not a problem: doctor may run before plugpool is deployed.
 */
export async function checkRunningInstance(config: AppConfig, timeoutMs = 1000): Promise<RunningRow[]> {
  const url = opsUrl(config);
  let text: string;
  describeOrigin(url, { maxBytes: MAX_ANSWER_BYTES });
  try {
    // The timeout runs on while the body arrives; an answer over the cap counts as none.
    const response = await createHttpClient().get(url, { signal: AbortSignal.timeout(timeoutMs) });
    const answer = response.ok ? await readAnswer(response, MAX_ANSWER_BYTES) : undefined;
    if (answer === undefined) throw new Error(`HTTP ${response.status}, or an answer of more than ${MAX_ANSWER_BYTES} bytes`);
    text = answer.text;
  } catch {
    return [{ area: "running", subject: url, status: "ok", detail: "no plugpool answers here (quarantines are known only to a running plugpool)" }];
  }
  const counts = [...text.matchAll(INSTANCES)]
    .filter((m) => m[3] !== "0")
    .map((m) => `${m[1] ?? ""}: ${m[3] ?? ""} ${m[2] ?? ""}`);
  const instances = `instances ${counts.length === 0 ? "none" : counts.join(", ")}`;
  const rows: RunningRow[] = [
    DRY_RUN.test(text)
      ? { area: "running", subject: url, status: "warn", detail: `serving in dry run (--dry-run): observing only, no plug is switched; ${instances}` }
      : { area: "running", subject: url, status: "ok", detail: `serving; ${instances}` },
  ];
  for (const m of text.matchAll(QUARANTINED)) {
    rows.push({
      area: "running",
      subject: `machine ${m[1] ?? ""}`,
      status: "warn",
      detail: `quarantined after ${m[2] ?? ""} failed boot(s) in a row: left out of scale-ups until the back-off ends or it registers`,
    });
  }
  return rows;
}
