// Bugs planted one at a time in the safety checks: each must make the domain's safety tests fail. A plant is a
// list of exact replacements in src/domain; `run.ts` applies each to a copy of the repository.

export interface Plant {
  readonly name: string;
  readonly edits: readonly { readonly file: string; readonly find: string; readonly replace: string }[];
}

export const PLANTS: readonly Plant[] = [
  {
    name: "skip the re-check on a plug-off retry",
    edits: [
      {
        file: "src/domain/switching.ts",
        find: 'import { poweredByPlugpool, stateOf } from "./state.ts";',
        replace: 'import { jobOf, poweredByPlugpool, stateOf } from "./state.ts";',
      },
      {
        file: "src/domain/switching.ts",
        find: "    if (verdict.allowed) return true;",
        replace: '    if (verdict.allowed || (jobOf(stateOf(ctx, machine))?.attempts["plug-off"] ?? 0) > 0) return true;',
      },
      {
        file: "src/domain/power-off-steps.ts",
        find: "    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);\n    if (!verdict.allowed) return abort(verdict);\n    const ended =",
        replace:
          '    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);\n    if (!verdict.allowed && (job.attempts["plug-off"] ?? 0) === 0) return abort(verdict);\n    const ended =',
      },
    ],
  },
  {
    name: "no check at the plug",
    edits: [{ file: "src/domain/switching.ts", find: "    if (verdict.allowed) return true;", replace: "    if (verdict.allowed || cut.reason === \"power-off\") return true;" }],
  },
  {
    name: "drop check-taint's verdict",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);\n    if (!verdict.allowed) return abort(verdict);\n    const nodes = nodesOf(pool, machine);",
        replace: "    const nodes = nodesOf(pool, machine);",
      },
    ],
  },
  {
    name: "create the power-off pod without a verdict",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "    const verdict = await shutdownVerdict(pool, machine, options);\n    if (!verdict.allowed) return abort(verdict);\n    await pool.deps.teardown.createPowerOffPod(",
        replace: "    await pool.deps.teardown.createPowerOffPod(",
      },
    ],
  },
  {
    name: "ask a BMC for an OS shutdown without a verdict",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "        const verdict = await shutdownVerdict(pool, machine, o);\n        if (!verdict.allowed) refusal = verdict;\n        return verdict.allowed;",
        replace: "        return o !== null;",
      },
    ],
  },
  {
    name: "take a BMC shutdown's verdict before its wait at the BMC",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "      let refusal: RefusedVerdict | undefined;\n      const mayShutDown = async (o?: CallOptions): Promise<boolean> => {\n        const verdict = await shutdownVerdict(pool, machine, o);",
        replace: "      let refusal: RefusedVerdict | undefined;\n      const early = await shutdownVerdict(pool, machine, options);\n      const mayShutDown = async (o?: CallOptions): Promise<boolean> => {\n        const verdict = o === null ? early : early;",
      },
    ],
  },
  {
    name: "count a name-matched Node as unregistered",
    edits: [
      {
        file: "src/domain/matching.ts",
        find: "  return byName === undefined || byID.some((n) => n.name === byName.name) ? byID : [...byID, byName];",
        replace: "  return byName === undefined || byName.providerID !== \"\" || byID.some((n) => n.name === byName.name) ? byID : [...byID, byName];",
      },
      {
        file: "src/domain/safety.ts",
        find: "  const nodes = [...fresh, ...nodesOf(ctx, machine).filter((v) => !fresh.some((f) => f.name === v.name))];",
        replace:
          "  const nodes = [...fresh, ...nodesOf(ctx, machine).filter((v) => !fresh.some((f) => f.name === v.name))].filter((n) => n.providerID === instanceId(ctx.config.providerIDPrefix, machine));",
      },
    ],
  },
  {
    name: "ignore the hold",
    edits: [
      { file: "src/domain/safety.ts", find: "  const held = nodes.find(hasHoldAnnotation);", replace: "  const held = nodes.find(() => false);" },
      { file: "src/domain/safety.ts", find: "  if (machine.hold) return { allowed: false, rule: \"held\", detail: `${machine.name} is held in the configuration` };\n  const held", replace: "  const held" },
    ],
  },
  {
    name: "resume a power-off whose DeleteNodes is still recording it",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: '  if (kind === "powering-off" || kind === "marking") return;',
        replace: '  if (kind === "powering-off") return;',
      },
    ],
  },
  {
    name: "undo a failed DeleteNodes' record while its writes may still land",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "  if (job.undoing?.writesOut === true) return COMPENSATION_POLL_MS;\n",
        replace: "",
      },
    ],
  },
  {
    name: "undo a failed DeleteNodes' record only where the view shows it",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "    ...(job.undoing?.nodes ?? []),\n    ...(job.node === \"\" ? [] : [job.node]),\n",
        replace: "",
      },
    ],
  },
  {
    name: "resume a pending power-off record",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "  const committed = records.find((r) => !r.record.pending)?.record;",
        replace: "  const committed = records[0]?.record;",
      },
    ],
  },
  {
    name: "resume a power-off this process undid when a lagging view shows its record again",
    edits: [
      {
        file: "src/domain/power-off.ts",
        find: "  if (startedAt === undefined || replayed) {",
        replace: "  if (startedAt === undefined) {",
      },
    ],
  },
  {
    name: "keep a NotReady seen once for the whole power-off",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: '      if (ready === undefined) return done(facts.hardCut === undefined ? "node NotReady" : "hard cut");',
        replace: '      if (ready === undefined || ready !== undefined) return done(facts.hardCut === undefined ? "node NotReady" : "hard cut");',
      },
    ],
  },
  {
    name: "take a plug read off once for off for the rest of the power-off",
    edits: [
      {
        file: "src/domain/power-off-steps.ts",
        find: "      const ready = facts.hardCut === undefined && !mayBeCut(job) ? nodes.find((n) => n.ready) : undefined;",
        replace: "      const ready = facts.hardCut === undefined && facts.powerSeenOff === undefined && !mayBeCut(job) ? nodes.find((n) => n.ready) : undefined;",
      },
      {
        file: "src/domain/safety.ts",
        find: "    if (ready !== undefined && job?.facts.hardCut === undefined) {",
        replace: "    if (ready !== undefined && job?.facts.hardCut === undefined && job?.facts.powerSeenOff === undefined) {",
      },
    ],
  },
  {
    name: "cut at the plug a machine whose Node is Ready again",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "    if (ready !== undefined && job?.facts.hardCut === undefined) {",
        replace: "    if (ready !== undefined && ready === undefined) {",
      },
    ],
  },
  {
    name: "cut an unregistered machine whose power sensor gave no draw",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "  if (machine.power.measuresWatts && (watts === undefined || watts > ctx.config.powerOff.standbyWatts)) {",
        replace: "  if (machine.power.measuresWatts && watts !== undefined && watts > ctx.config.powerOff.standbyWatts) {",
      },
    ],
  },
  {
    name: "take a faulty sensor's negative draw for standby",
    edits: [{ file: "src/domain/switching.ts", find: "  if (watts === undefined || watts >= 0) return reading;", replace: "  if (watts !== null) return reading;" }],
  },
  {
    name: "begin a DeleteNodes' power-off on the Node the view shows when the call ends",
    edits: [
      {
        file: "src/domain/scale-down.ts",
        find: "  for (const { machine, node } of toPowerOff) startPowerOff(ctx, machine, node, startedAt, false);",
        replace: "  for (const { machine } of toPowerOff) startPowerOff(ctx, machine, nodesOf(ctx, machine)[0]?.name ?? \"\", startedAt, false);",
      },
    ],
  },
  {
    name: "let a lagging view's copy of a deleted Node stand in for it at the cut",
    edits: [
      {
        file: "src/domain/safety.ts",
        find: "    if (fresh.length === 0 && job !== undefined && job.node !== \"\"",
        replace: "    if (nodes.length === 0 && job !== undefined && job.node !== \"\"",
      },
    ],
  },
  {
    name: "cut an unregistered machine plugpool did not power on",
    edits: [
      { file: "src/domain/safety.ts", find: "  if (!poweredByPlugpool(ctx, machine)) {\n    return { allowed: false, rule: \"powered-outside\"", replace: "  if (poweredByPlugpool(ctx, machine) && false) {\n    return { allowed: false, rule: \"powered-outside\"" },
      { file: "src/domain/instances.ts", find: "  if (poweredByPlugpool(ctx, machine) || st.plan.kind", replace: "  if (st.power.plug === \"on\" || poweredByPlugpool(ctx, machine) || st.plan.kind" },
    ],
  },
  {
    name: "an act without the leadership check: the cut asks only the safety verdict at the plug",
    edits: [
      {
        file: "src/domain/leadership.ts",
        find: "    if (allowed) ensureActing(leadership, what);\n",
        replace: "    if (allowed && what.length === 0) ensureActing(leadership, what);\n",
      },
    ],
  },
  {
    name: "an act without the leadership check: cluster writes go out unasked",
    edits: [
      {
        file: "src/domain/leadership.ts",
        find: "  const act = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {\n    ensureActing(leadership, what);\n",
        replace: "  const act = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {\n    if (what === \"\") ensureActing(leadership, what);\n",
      },
    ],
  },
];
