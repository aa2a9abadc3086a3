// Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource): a template with an invalid one
// makes cluster-autoscaler reject the whole template, so they are checked here, at start-up.

const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$/;

const DECIMAL_EXPONENT: Readonly<Record<string, number>> = {
  n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18,
};
const BINARY_EXPONENT: Readonly<Record<string, number>> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };

/** What the config needs to know about a quantity: its sign and whether it is a whole number. */
export interface QuantityFacts {
  readonly sign: -1 | 0 | 1;
  readonly isInteger: boolean;
}

/** Returns undefined when `text` is not a Kubernetes quantity. */
export function parseQuantity(text: string): QuantityFacts | undefined {
  const match = QUANTITY.exec(text);
  if (!match) return undefined;
  const [, signText = "", number = "", suffix = ""] = match;
  const [whole = "", fraction = ""] = number.split(".");
  const digits = BigInt((whole || "0") + fraction);
  const sign = digits === 0n ? 0 : signText === "-" ? -1 : 1;
  const binary = BINARY_EXPONENT[suffix];
  // Neither table knows "e<n>": its exponent is the number after the "e".
  const exponent = binary === undefined ? (DECIMAL_EXPONENT[suffix] ?? Number(suffix.slice(1))) : 0;
  return { sign, isInteger: isWhole(digits, binary ?? 0, exponent - fraction.length) };
}

/** Whether digits × 2^binary × 10^decimal is a whole number, computed exactly. */
function isWhole(digits: bigint, binary: number, decimal: number): boolean {
  if (digits === 0n || decimal >= 0) return true;
  // 10^-decimal must divide digits × 2^binary, so 5^-decimal must divide digits: impossible once
  // 5^-decimal exceeds digits (this bound also keeps huge exponents like "1e-99999" cheap).
  if (-decimal > digits.toString().length * 2) return false;
  return (digits * 2n ** BigInt(binary)) % 10n ** BigInt(-decimal) === 0n;
}

/** Beyond this decimal exponent two quantities are not compared (the exact arithmetic would be huge). */
const MAX_COMPARED_EXPONENT = 100;

/**
 * The sign of a − b for two quantities, exactly (1Gi > 1G, 1500m = 1.5); undefined when either is not a quantity
 * or its exponent is beyond what is compared.
 */
export function compareQuantities(a: string, b: string): -1 | 0 | 1 | undefined {
  const x = exactValue(a);
  const y = exactValue(b);
  if (x === undefined || y === undefined) return undefined;
  const difference = x.numerator * y.denominator - y.numerator * x.denominator;
  return difference === 0n ? 0 : difference > 0n ? 1 : -1;
}

function exactValue(text: string): { readonly numerator: bigint; readonly denominator: bigint } | undefined {
  const match = QUANTITY.exec(text);
  if (!match) return undefined;
  const [, signText = "", number = "", suffix = ""] = match;
  const [whole = "", fraction = ""] = number.split(".");
  const binary = BINARY_EXPONENT[suffix] ?? 0;
  const decimal = (BINARY_EXPONENT[suffix] === undefined ? (DECIMAL_EXPONENT[suffix] ?? Number(suffix.slice(1))) : 0) - fraction.length;
  if (Math.abs(decimal) > MAX_COMPARED_EXPONENT) return undefined;
  const digits = BigInt((whole || "0") + fraction) * (signText === "-" ? -1n : 1n) * 2n ** BigInt(binary);
  return decimal >= 0
    ? { numerator: digits * 10n ** BigInt(decimal), denominator: 1n }
    : { numerator: digits, denominator: 10n ** BigInt(-decimal) };
}
