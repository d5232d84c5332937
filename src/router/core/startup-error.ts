// A start-up failure the operator can fix (a port in use, no kubeconfig): the CLI prints its one line, no stack.

export class StartupError extends Error {
  constructor(
    message: string,
    /** 2 for a configuration the router cannot run with, 1 for an environment problem */
    readonly exitCode: number = 1,
  ) {
    super(message);
    this.name = 'StartupError';
  }
}
