// The public surface of plugpool's domain (package subpath "./domain"). Importing it starts nothing.
// Everything else under src/domain is internal and may change without notice.

export { createPool } from "./pool.ts";
export type { Pool, PoolDeps } from "./pool.ts";

export { mayCutPower } from "./safety.ts";
export type { Verdict } from "./safety.ts";

export { notActing, poolThrough } from "./leadership.ts";

export { PlugpoolError, isPlugpoolError } from "./errors.ts";
export type { ErrorCode } from "./errors.ts";

export type { PoolEvent, PowerOffStep, SafetyRule } from "./events.ts";
export { describeEvent } from "./event-catalogue.ts";
export type { EventText } from "./event-catalogue.ts";

export type {
  CallOptions,
  Clock,
  ClusterView,
  CutGuard,
  DeviceCheck,
  DeviceIdentity,
  Leadership,
  NodeLookup,
  NodeTeardown,
  PowerRecords,
  PowerSwitch,
  ReadOptions,
  Reporter,
  SwitchOptions,
} from "./ports.ts";

export {
  DEFAULT_QUARANTINE,
  DEFAULT_SCALE_UP,
  formatPowerOffRecord,
  HOLD_ANNOTATION,
  POWER_OFF_ANNOTATION,
  powerOffRecordOf,
  TO_BE_DELETED_TAINT,
} from "./model.ts";
export type {
  Device,
  DeviceAttribute,
  DeviceSlice,
  Instance,
  InstanceState,
  Machine,
  MachineUsage,
  NodeGroupInfo,
  NodeGroupSpec,
  NodeRef,
  NodeTemplate,
  NodeView,
  PowerControl,
  PlugReading,
  PlugState,
  PoolConfig,
  PowerOffPodView,
  PowerOffRecord,
  PowerOffSettings,
  PowerOnRecord,
  QuarantineRecord,
  QuarantineEntry,
  QuarantineSettings,
  ScaleUpOrder,
  ScaleUpSettings,
  Taint,
  TaintEffect,
  TemplateNode,
} from "./model.ts";
