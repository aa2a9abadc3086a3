/**
 * An address whose device can change while plugpool runs, as a DHCP lease handed out anew does (no reservation,
 * a replaced plug, a reset router): a TCP relay on 127.0.0.1 (port 0) to a device's listener, pointed at another
 * device at any time. Works for every emulator and real server on loopback, TLS included (the bytes pass as they
 * are). Pointing it elsewhere drops the connections it carries, as the old device leaving the address does; the
 * device on the far side sees every connection its client closes closed.
 */
import { createServer, connect, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

export interface Lease {
  /** The address plugpool is configured with, e.g. http://127.0.0.1:41234 (the scheme of the first device). */
  readonly url: string;
  /** The device's URL it reaches now. */
  readonly target: string;
  /** From now on, connections reach the device at `url`; connections it carried are dropped. */
  pointTo(url: string): void;
  close(): Promise<void>;
}

/** A lease of a new address to the device at `url`. */
export async function lease(url: string): Promise<Lease> {
  let target = new URL(url);
  const pairs = new Set<Socket>();
  const server = createServer((client) => {
    const device = connect(Number(target.port), target.hostname);
    pairs.add(client);
    const drop = (): void => {
      client.destroy();
      device.destroy();
      pairs.delete(client);
    };
    client.on("error", drop).on("close", drop);
    device.on("error", drop).on("close", drop);
    client.pipe(device);
    device.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${target.protocol}//127.0.0.1:${port}`,
    get target() {
      return target.origin;
    },
    pointTo(next) {
      target = new URL(next);
      for (const client of pairs) client.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of pairs) client.destroy();
        server.close(() => { resolve(); });
      }),
  };
}

/** The two addresses swap devices: `a` reaches what `b` reached, and `b` what `a` did. */
export function swap(a: Lease, b: Lease): void {
  const reachedByA = a.target;
  a.pointTo(b.target);
  b.pointTo(reachedByA);
}
