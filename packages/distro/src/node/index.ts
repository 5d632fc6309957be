// Node-only entry point: browsers get their GPUDevice from onnxruntime-web instead.
export * from './dawn.ts';
