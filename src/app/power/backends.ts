// Every kind of power control plugpool can drive. Adding one is a folder under src/adapters/ and a line here.
import { esphomeBackend } from "../../adapters/esphome/backend.ts";
import { homeAssistantBackend } from "../../adapters/home-assistant/backend.ts";
import type { PowerBackend } from "../../adapters/power-backend.ts";
import { redfishBackend } from "../../adapters/redfish/backend.ts";
import { shellyBackend } from "../../adapters/shelly/backend.ts";

export const BACKENDS: readonly PowerBackend<unknown>[] = [esphomeBackend, shellyBackend, homeAssistantBackend, redfishBackend];
