export { FakeKube, startFakeKube, type FakeKubeOptions, type WatchFailureMode } from './fake-kube.js';
export { ApiError, type KubeObject } from './store.js';
export { parseLabelSelector, labelSelector } from './selectors.js';
