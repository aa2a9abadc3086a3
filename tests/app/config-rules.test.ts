// The configuration's rejection rules, one behaviour per test, each checked by the exact issues it produces.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { config, esphomePlugs, group, issuesOf, load, node } from "./fixtures/config-builders.ts";

describe("loadConfig() rejection rules", () => {
  describe("plugs", () => {
    it("rejects two nodes on the same plug: same normalised URL and the same switch, ignoring case", () => {
      const doc = config([
        group("workers", [
          node("worker-1", { url: "http://plug.example", switch: "Relay" }),
          node("worker-2", { url: "HTTP://Plug.Example:80/", switch: "relay" }),
        ]),
      ]);
      assert.deepEqual(issuesOf(doc), [
        'nodeGroups[0].nodes[1].plug: is the same power control as nodeGroups[0].nodes[0].plug (plug http://plug.example switch "relay", on device plug.example); each machine needs its own',
      ]);
    });

    it("rejects the same plug in two groups", () => {
      const doc = config([
        group("a", [node("a-1", { url: "https://strip.example:443", switch: "Outlet 1" })]),
        group("b", [node("b-1", { url: "https://strip.example", switch: "outlet_1" })]),
      ]);
      assert.deepEqual(issuesOf(doc), [
        'nodeGroups[1].nodes[0].plug: is the same power control as nodeGroups[0].nodes[0].plug (plug https://strip.example switch "outlet_1", on device strip.example); each machine needs its own',
      ]);
    });

    const spellings: readonly [string, string, string][] = [
      ["a trailing dot", "http://plug.example", "http://plug.example."],
      ["an IPv4-mapped IPv6 address", "http://10.0.0.5", "http://[::ffff:10.0.0.5]"],
      ["the hex form of a mapped address", "http://[::ffff:10.0.0.5]", "http://[::ffff:a00:5]"],
      ["a default port", "http://plug.example", "http://plug.example:80"],
      ["http and https", "http://plug.example", "https://plug.example:443"],
      ["upper case", "http://plug.example:8080", "http://PLUG.Example:8080"],
    ];
    for (const [how, first, second] of spellings) {
      it(`rejects two nodes on the same device and switch spelled with ${how}`, () => {
        const doc = config([group("workers", [node("worker-1", { url: first }), node("worker-2", { url: second })])]);
        const issues = issuesOf(doc);
        assert.equal(issues.length, 1);
        assert.match(issues[0] ?? "", /^nodeGroups\[0\]\.nodes\[1\]\.plug: is the same power control as nodeGroups\[0\]\.nodes\[0\]\.plug \(plug .*, on device /);
      });
    }

    it("accepts one host on two ports as two devices", () => {
      const doc = config([group("workers", [node("worker-1", { url: "http://plug.example" }), node("worker-2", { url: "http://plug.example:8080" })])]);
      assert.deepEqual(esphomePlugs(load(doc)).map((p) => p.device), ["plug.example", "plug.example:8080"]);
    });

    it("accepts two relays of one device, and one switch name on two devices", () => {
      const doc = config([
        group("workers", [
          node("worker-1", { url: "http://strip.example", switch: "Outlet 1" }),
          node("worker-2", { url: "http://strip.example", switch: "Outlet 2" }),
          node("worker-3", { url: "http://other.example", switch: "Outlet 1" }),
        ]),
      ]);
      assert.equal(load(doc).pool.groups[0]?.machines.length, 3);
    });

    it("rejects a URL with credentials without repeating them", () => {
      const issues = issuesOf(config([group("workers", [node("worker-1", { url: "http://admin:secret@plug.example" })])]));
      assert.deepEqual(issues, [
        "nodeGroups[0].nodes[0].plug.url: must be an http:// or https:// URL without credentials: set PLUGPOOL_PLUG_USERNAME and PLUGPOOL_PLUG_PASSWORD instead",
      ]);
      assert.ok(!issues.join("\n").includes("secret"));
      assert.ok(!issues.join("\n").includes("admin:"));
    });

    it("rejects a URL with credentials even where its scheme is also wrong, without repeating them", () => {
      const issues = issuesOf(config([group("workers", [node("worker-1", { url: "ftp://admin:secret@plug.example" })])]));
      assert.deepEqual(issues, [
        "nodeGroups[0].nodes[0].plug.url: must be an http:// or https:// URL without credentials (e.g. http://plug-1.local)",
      ]);
    });

    for (const url of ["plug.example", "ftp://plug.example", "http:plug.example", "http://plug example", "http://", ""]) {
      it(`rejects ${JSON.stringify(url)} as not an http(s) URL`, () => {
        assert.deepEqual(issuesOf(config([group("workers", [node("worker-1", { url })])])), [
          "nodeGroups[0].nodes[0].plug.url: must be an http:// or https:// URL without credentials (e.g. http://plug-1.local)",
        ]);
      });
    }

    for (const url of ["http://plug.example/switch/relay", "http://plug.example/?x=1", "http://plug.example#top", "http://plug.example?"]) {
      it(`rejects ${url} for its path, query or fragment`, () => {
        assert.deepEqual(issuesOf(config([group("workers", [node("worker-1", { url })])])), [
          "nodeGroups[0].nodes[0].plug.url: must be the device's base URL, without a path, query or fragment (e.g. http://plug-1.local)",
        ]);
      });
    }

    it("rejects an empty switch or power sensor name", () => {
      assert.deepEqual(issuesOf(config([group("workers", [node("worker-1", { switch: "", powerSensor: "" })])])), [
        "nodeGroups[0].nodes[0].plug.switch: must not be empty",
        "nodeGroups[0].nodes[0].plug.powerSensor: must not be empty",
      ]);
    });
  });

  describe("node names", () => {
    it("rejects a node name listed twice in one group, naming both paths", () => {
      const doc = config([group("workers", [node("worker-1"), node("worker-1", { url: "http://other.example" })])]);
      assert.deepEqual(issuesOf(doc), [
        'nodeGroups[0].nodes[1].name: "worker-1" is also listed at nodeGroups[0].nodes[0].name; node names must be unique across all groups',
      ]);
    });

    it("rejects a node name listed in two groups, naming both paths", () => {
      const doc = config([group("a", [node("m-1")]), group("b", [node("m-2"), node("m-1", { url: "http://other.example" })])]);
      assert.deepEqual(issuesOf(doc), [
        'nodeGroups[1].nodes[1].name: "m-1" is also listed at nodeGroups[0].nodes[0].name; node names must be unique across all groups',
      ]);
    });

    it("rejects a name that is not a valid Node name", () => {
      assert.deepEqual(issuesOf(config([group("workers", [node("Worker_1", { url: "http://w.example" })])])), [
        "nodeGroups[0].nodes[0].name: must be a valid Node name: up to 253 lower-case letters, digits, '-' or '.', each dot-separated part starting and ending with a letter or digit",
      ]);
    });
  });

  describe("group sizes", () => {
    it("rejects a maxSize above the number of nodes listed", () => {
      assert.deepEqual(issuesOf(config([group("a", [node("a-1")]), group("b", [node("b-1"), node("b-2")], { maxSize: 3 })])), [
        "nodeGroups[1].maxSize: 3 is more than the 2 nodes listed",
      ]);
    });

    it("rejects a minSize above maxSize", () => {
      assert.deepEqual(issuesOf(config([group("a", [node("a-1"), node("a-2")], { minSize: 2, maxSize: 1 })])), [
        "nodeGroups[0].minSize: 2 is more than maxSize 1",
      ]);
    });

    it("rejects negative sizes", () => {
      assert.deepEqual(issuesOf(config([group("a", [node("a-1")], { minSize: -1, maxSize: -2 })])), [
        "nodeGroups[0].maxSize: must not be negative (found -2)",
        "nodeGroups[0].minSize: must not be negative (found -1)",
      ]);
    });

    it("rejects sizes that are not whole numbers", () => {
      assert.deepEqual(issuesOf(config([group("a", [node("a-1")], { minSize: 0.5, maxSize: "1" })])), [
        "nodeGroups[0].maxSize: must be a whole number, not a string",
        "nodeGroups[0].minSize: must be a whole number, not a number",
      ]);
    });

    it("accepts maxSize 0 and defaults minSize to 0", () => {
      const loaded = load(config([group("a", [node("a-1")], { maxSize: 0 })]));
      assert.deepEqual([loaded.pool.groups[0]?.minSize, loaded.pool.groups[0]?.maxSize], [0, 0]);
    });
  });

  describe("groups", () => {
    it("rejects two groups with the same id", () => {
      assert.deepEqual(issuesOf(config([group("workers", [node("w-1")]), group("workers", [node("w-2")])])), [
        'nodeGroups[1].id: "workers" is also used at nodeGroups[0].id; group ids must be unique',
      ]);
    });

    it("rejects an id that is not a DNS label", () => {
      assert.deepEqual(issuesOf(config([group("GPU.workers", [node("w-1")])])), [
        "nodeGroups[0].id: must be up to 63 lower-case letters, digits or '-', starting and ending with a letter or digit",
      ]);
    });

    it("rejects no groups, and a group without nodes", () => {
      assert.deepEqual(issuesOf(config([])), ["nodeGroups: must list at least one entry"]);
      assert.deepEqual(issuesOf(config([group("a", [], { maxSize: 0 })])), ["nodeGroups[0].nodes: must list at least one entry"]);
    });
  });

  describe("listen address", () => {
    for (const listen of ["0.0.0.0:8086", "10.0.0.5:8086", "[::]:8086", "plugpool.example:8086"]) {
      it(`rejects ${listen} without tls`, () => {
        const host = listen.slice(0, listen.lastIndexOf(":")).replace(/^\[|\]$/g, "");
        assert.deepEqual(issuesOf(config(undefined, { listen })), [
          `listen: host ${host} is not loopback; without tls, listen on 127.0.0.1, ::1 or localhost (cluster-autoscaler runs in the same pod)`,
        ]);
      });
    }

    it("accepts a non-loopback address with tls", () => {
      const tls = { cert: "/tls/tls.crt", key: "/tls/tls.key", cacert: "/tls/ca.crt" };
      assert.deepEqual(load(config(undefined, { listen: "0.0.0.0:8086", tls })).listen, { host: "0.0.0.0", port: 8086 });
    });

    for (const [listen, host] of [["127.0.0.2:1", "127.0.0.2"], ["[::1]:8086", "::1"], ["localhost:8086", "localhost"]] as const) {
      it(`accepts the loopback address ${listen} without tls`, () => {
        assert.equal(load(config(undefined, { listen })).listen.host, host);
      });
    }

    for (const listen of ["127.0.0.1", "127.0.0.1:65536", ":8086", "[127.0.0.1]:8086", "::1:8086", "127.0.0.1:http"]) {
      it(`rejects ${JSON.stringify(listen)} as not host:port`, () => {
        assert.deepEqual(issuesOf(config(undefined, { listen })), [
          "listen: must be host:port or [IPv6]:port with a port from 0 to 65535, e.g. 127.0.0.1:8086",
        ]);
      });
    }

    it("rejects tls without all three files", () => {
      assert.deepEqual(issuesOf(config(undefined, { tls: { cert: "/tls/tls.crt" } })), ["tls.key: is required", "tls.cacert: is required"]);
    });

    it("rejects an empty tls.clientNames, an empty name and a name listed twice", () => {
      const tls = (clientNames: unknown) => config(undefined, { tls: { cert: "c", key: "k", cacert: "a", clientNames } });
      assert.deepEqual(issuesOf(tls([])), ["tls.clientNames: must list at least one entry"]);
      assert.deepEqual(issuesOf(tls(["ca.example", ""])), ["tls.clientNames[1]: must not be empty"]);
      assert.deepEqual(issuesOf(tls(["ca.example", "ca.example"])), ["tls.clientNames[1]: is the same as tls.clientNames[0]; list each value once"]);
      assert.deepEqual(issuesOf(tls("ca.example")), ["tls.clientNames: must be a list, not a string"]);
    });

    it("leaves tls.clientNames out when it is not set: any certificate the CA signed may call", () => {
      assert.deepEqual(load(config(undefined, { tls: { cert: "c", key: "k", cacert: "a" } })).tls, { certFile: "c", keyFile: "k", caFile: "a" });
    });

    it("rejects an opsListen on the port of listen", () => {
      assert.deepEqual(issuesOf(config(undefined, { opsListen: "0.0.0.0:8086" })), [
        "opsListen: port 8086 is already used by listen; choose another port",
      ]);
    });
  });

  describe("unknown keys", () => {
    it("rejects an unknown top-level key, suggesting the near miss", () => {
      assert.deepEqual(issuesOf(config(undefined, { powerOf: { grace: "1m" } })), ["powerOf: unknown key (did you mean powerOff?)"]);
    });

    it("suggests across case and separators", () => {
      assert.deepEqual(issuesOf(config(undefined, { provider_id_prefix: "x://" })), [
        "provider_id_prefix: unknown key (did you mean providerIDPrefix?)",
      ]);
    });

    it("lists the allowed keys when nothing is near", () => {
      assert.deepEqual(issuesOf(config(undefined, { plugs: { retries: 3 } })), ["plugs.retries: unknown key (expected one of timeout)"]);
    });

    it("rejects unknown keys at every level", () => {
      const doc = config(
        [
          group("a", [node("a-1", { user: "x" }, { holds: true })], {
            maxsize: 1,
            template: { cpu: "1", memory: "1Gi", labelz: {}, taints: [{ key: "k", effect: "NoSchedule", operator: "Exists" }] },
          }),
        ],
        { powerOff: { gracePeriod: "1m" }, tls: { cert: "c", key: "k", cacert: "a", ca: "x" } },
      );
      assert.deepEqual(issuesOf(doc), [
        "nodeGroups[0].template.labelz: unknown key (did you mean labels?)",
        "nodeGroups[0].template.taints[0].operator: unknown key (expected one of key, value, effect)",
        "nodeGroups[0].nodes[0].plug.user: unknown key (expected one of url, switch, powerSensor, credentials)",
        "nodeGroups[0].nodes[0].holds: unknown key (did you mean hold?)",
        "nodeGroups[0].maxsize: unknown key (did you mean maxSize?)",
        "powerOff.gracePeriod: unknown key (did you mean grace?)",
        "tls.ca: unknown key (expected one of cert, key, cacert, clientNames)",
      ]);
    });
  });

  describe("required keys and types", () => {
    it("rejects a file without providerIDPrefix or nodeGroups", () => {
      assert.deepEqual(issuesOf({ listen: "127.0.0.1:8086" }), ["providerIDPrefix: is required", "nodeGroups: is required"]);
    });

    it("rejects an empty providerIDPrefix", () => {
      assert.deepEqual(issuesOf(config(undefined, { providerIDPrefix: "" })), ["providerIDPrefix: must not be empty"]);
    });

    it("rejects a node without a power control, and a plug without url or switch", () => {
      const doc = config([group("a", [{ name: "a-1" }, { name: "a-2", plug: {} }])]);
      assert.deepEqual(issuesOf(doc), [
        "nodeGroups[0].nodes[0]: needs a power control: set one of plug, shelly, homeAssistant, redfish",
        "nodeGroups[0].nodes[1].plug.url: is required",
        "nodeGroups[0].nodes[1].plug.switch: is required",
      ]);
    });

    it("rejects values of the wrong type, saying what was found", () => {
      const doc = config([group("a", [node("a-1", {}, { hold: "yes" })], { template: ["cpu"] })], { gpuTypes: "a100" });
      assert.deepEqual(issuesOf(doc), [
        "nodeGroups[0].template: must be a mapping, not a list",
        "nodeGroups[0].nodes[0].hold: must be true or false, not a string",
        "gpuTypes: must be a list, not a string",
      ]);
    });

    it("rejects a GPU type listed twice", () => {
      assert.deepEqual(issuesOf(config(undefined, { gpuTypes: ["a100", "h100", "a100"] })), [
        "gpuTypes[2]: is the same as gpuTypes[0]; list each value once",
      ]);
    });
  });

  describe("every problem at once", () => {
    it("reports schema, semantic and environment problems together, in file order", () => {
      const doc = config(
        [
          group("a", [node("a-1", { url: "http://a.example/x" }), node("a-1", { url: "http://b.example" })], { maxSize: 3, colour: "red" }),
        ],
        { devices: { timeouts: { plug: "40s" } } },
      );
      assert.deepEqual(issuesOf(doc, { PLUGPOOL_PLUG_USERNAME: "u" }), [
        "nodeGroups[0].maxSize: 3 is more than the 2 nodes listed",
        "nodeGroups[0].nodes[0].plug.url: must be the device's base URL, without a path, query or fragment (e.g. http://plug-1.local)",
        'nodeGroups[0].nodes[1].name: "a-1" is also listed at nodeGroups[0].nodes[0].name; node names must be unique across all groups',
        "nodeGroups[0].colour: unknown key (expected one of id, minSize, maxSize, template, idleWatts, nodes)",
        "devices.timeouts.plug: must be more than 0 and at most 30s",
        "PLUGPOOL_PLUG_PASSWORD: is not set but PLUGPOOL_PLUG_USERNAME is; plug credentials need both variables, or neither",
      ]);
    });
  });
});
