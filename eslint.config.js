// Type-aware linting for the project's own code; generated code under gen/ and the copies and reports of a mutation run are not linted.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "gen/**", "node_modules/**", ".bench/**", ".stryker-tmp/**", "reports/**"] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // @kubernetes/client-node models are classes that its own API takes as plain object literals.
      "@typescript-eslint/no-unsafe-class-instance-assignment": "off",
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
      // node:test's describe/it return promises the runner itself awaits.
      "@typescript-eslint/no-floating-promises": ["error", {
        allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["describe", "it", "suite", "test"] }],
      }],
    },
  },
  {
    // The domain is pure: nothing from outside itself, no I/O, no ambient time.
    files: ["src/domain/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [
        { regex: "^(?!\\.{1,2}/)", message: "src/domain imports only other domain files." },
        { regex: "^\\.\\./\\.\\./", message: "src/domain imports only other domain files." },
      ] }],
      "no-restricted-globals": ["error", "setTimeout", "setInterval", "process", "fetch", "Date"],
    },
  },
  { files: ["eslint.config.js"], ...tseslint.configs.disableTypeChecked },
);
