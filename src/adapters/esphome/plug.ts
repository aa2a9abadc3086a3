// An ESPHome plug as its adapter knows it: one relay (switch entity) of one device's web_server.
import type { SecretCredentials } from "../backend-section.ts";
import { normaliseDeviceUrl, type DeviceUrl } from "../device-url.ts";

/** One relay (switch entity) of one ESPHome device. */
export interface EsphomePlug {
  /** Base URL of the device, normalised (lower-case scheme and host, no trailing slash). */
  readonly url: string;
  /**
   * The physical device, however its URL is spelled: host without a trailing dot, an IPv4-mapped IPv6 address
   * as IPv4, lower case, and the port only when it is not the scheme's default (http and https of one host are
   * one device). Requests to one device are serialised; two machines never share a device and a switch.
   */
  readonly device: string;
  /** The switch entity's name as configured in ESPHome (e.g. "Relay"). */
  readonly switch: string;
  /** Name of a sensor entity reporting the plug's power draw in watts, when the plug has one. */
  readonly powerSensor?: string;
  /** Sent once the device asks for them: the plug's own, else the pair every plug shares; absent: none. */
  readonly credentials?: SecretCredentials;
}

/** A plug's base URL checked and normalised (see normaliseDeviceUrl). */
export function parsePlugUrl(text: string): DeviceUrl {
  return normaliseDeviceUrl(text, "e.g. http://plug-1.local", "set PLUGPOOL_PLUG_USERNAME and PLUGPOOL_PLUG_PASSWORD instead");
}

/**
 * ESPHome's object_id of an entity name (lower-case, characters outside [a-z0-9_-] as "_"): two switch names
 * with the same object_id are the same relay for firmware that addresses entities by object_id.
 */
export function switchObjectId(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9_-]/gu, "_");
}
