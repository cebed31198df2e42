import { defineSandbox } from "eve/sandbox";
import { defineSandboxProvider } from "eve/sandbox/provider";

// This agent's tools use no sandbox: one that refuses to start keeps eve from looking for Docker.
const NoSandbox = defineSandboxProvider<undefined, undefined, { none: true }, { none: true }, never>({
  name: "none",
  environment() {
    return {
      async prepare() {
        return { none: true };
      },
      async start() {
        throw new Error("This agent has no sandbox");
      },
      async resume() {
        throw new Error("This agent has no sandbox");
      },
    };
  },
});

export const environment = NoSandbox.environment(undefined);
export default defineSandbox(() => environment.open());
