// doctor's comparison of a registered machine's Node with its group's template. cluster-autoscaler plans a
// scale-up from zero on the template alone, so a template that promises what the real Node lacks (a label, room,
// no taint) makes it power machines on for pods that then stay Pending; one that promises less than the Node has
// (a taint the Node lacks) makes it leave pods Pending that a machine would run.
import type { V1Node } from "@kubernetes/client-node";
import type { NodeGroupSpec, Taint } from "../domain/index.ts";
import { templateNode } from "../domain/template.ts";
import { compareQuantities } from "./config/quantity.ts";

export interface TemplateRow {
  readonly area: "template";
  readonly subject: string;
  readonly status: "ok" | "warn" | "FAIL";
  readonly detail: string;
}

/**
 * Taints cluster-autoscaler strips from a Node before it uses it as a template: its own, those of passing node
 * conditions, and those it is told to treat as startup or status taints
 * (https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/utils/taints/taints.go).
 * Their presence or absence says nothing about the template.
 */
const TRANSIENT_TAINTS = new Set([
  "ToBeDeletedByClusterAutoscaler",
  "DeletionCandidateOfClusterAutoscaler",
  "node.kubernetes.io/not-ready",
  "node.kubernetes.io/unreachable",
  "node.kubernetes.io/unschedulable",
  "node.kubernetes.io/memory-pressure",
  "node.kubernetes.io/disk-pressure",
  "node.kubernetes.io/network-unavailable",
  "node.kubernetes.io/pid-pressure",
  "node.cloudprovider.kubernetes.io/uninitialized",
  "node.cloudprovider.kubernetes.io/shutdown",
]);
const TRANSIENT_TAINT_PREFIXES = [
  "ignore-taint.cluster-autoscaler.kubernetes.io/",
  "startup-taint.cluster-autoscaler.kubernetes.io/",
  "status-taint.cluster-autoscaler.kubernetes.io/",
];

/** Labels every template carries that name the template node itself, not what a machine offers. */
const TEMPLATE_OWN_LABELS = ["kubernetes.io/hostname", "node.kubernetes.io/instance-type"];

/**
 * Fails on what would mislead cluster-autoscaler: a template label missing or different on the Node; a template
 * taint the Node lacks, or a Node taint the template lacks (compared by key, value and effect, transient ones
 * left out); a template resource above the Node's allocatable. Warns about an extended resource (a name with a
 * '/') the Node offers and the template lacks. Labels the Node has beyond the template's are fine: the kubelet
 * and the distribution add many.
 */
export function compareWithTemplate(group: NodeGroupSpec, node: V1Node): TemplateRow {
  const template = templateNode(group);
  const name = node.metadata?.name ?? "";
  const subject = `template ${group.id} vs node ${name}`;
  const problems: string[] = [];

  const nodeLabels = node.metadata?.labels ?? {};
  const labelIssues = Object.entries(template.labels)
    .filter(([key]) => !TEMPLATE_OWN_LABELS.includes(key) || key in group.template.labels)
    .flatMap(([key, value]) => {
      const actual = nodeLabels[key];
      if (actual === value) return [];
      return [actual === undefined ? `label ${key}=${value} missing on the Node` : `label ${key} is ${actual} on the Node, ${value} in the template`];
    });
  if (labelIssues.length > 0) {
    problems.push(`${labelIssues.join(", ")} (CA would power a machine on for pods that select the template's labels and cannot run on it; set the label in the kubelet's --node-labels or k3s's node-label, or change the template)`);
  }

  const nodeTaints = (node.spec?.taints ?? []).map((t) => ({ key: t.key, value: t.value ?? "", effect: t.effect }));
  const templateTaints = template.taints.filter((t) => !isTransient(t.key)).map(taintText);
  const actualTaints = nodeTaints.filter((t) => !isTransient(t.key)).map(taintText);
  const onlyTemplate = templateTaints.filter((t) => !actualTaints.includes(t));
  const onlyNode = actualTaints.filter((t) => !templateTaints.includes(t));
  if (onlyTemplate.length > 0) {
    problems.push(`taint ${onlyTemplate.join(", ")} of the template missing on the Node (CA leaves pods without a toleration Pending that this machine would run)`);
  }
  if (onlyNode.length > 0) {
    problems.push(`taint ${onlyNode.join(", ")} on the Node missing in the template (CA would power a machine on for pods that do not tolerate it)`);
  }

  const allocatable = node.status?.allocatable ?? {};
  const short = Object.entries(template.allocatable).flatMap(([resource, promised]) => {
    const has = allocatable[resource] ?? "0";
    const sign = compareQuantities(promised, has);
    if (sign === undefined) return [`${resource} ${promised} in the template cannot be compared with ${has} on the Node`];
    return sign > 0 ? [`${resource} ${promised} in the template, ${has} allocatable on the Node`] : [];
  });
  if (short.length > 0) {
    problems.push(`${short.join(", ")} (CA would expect pods to fit that this machine cannot hold; lower the template to the Node's allocatable)`);
  }

  if (problems.length > 0) return { area: "template", subject, status: "FAIL", detail: problems.join("; ") };
  const unused = Object.entries(allocatable)
    .filter(([resource, amount]) => resource.includes("/") && !(resource in template.allocatable) && compareQuantities(amount, "0") === 1)
    .map(([resource, amount]) => `${resource}=${amount}`);
  if (unused.length > 0) {
    return {
      area: "template",
      subject,
      status: "warn",
      detail: `the Node offers ${unused.join(", ")}, which the template lacks: pods requesting it never scale this group up from zero (add it to template.resources)`,
    };
  }
  return { area: "template", subject, status: "ok", detail: "the Node has the template's labels and taints, and at least its allocatable" };
}

function isTransient(key: string): boolean {
  return TRANSIENT_TAINTS.has(key) || TRANSIENT_TAINT_PREFIXES.some((p) => key.startsWith(p));
}

function taintText(t: Taint | { readonly key: string; readonly value: string; readonly effect: string }): string {
  return `${t.key}${t.value === "" ? "" : `=${t.value}`}:${t.effect}`;
}
