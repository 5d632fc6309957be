// Reverse-mode automatic differentiation over the graph IR. The backward pass is built as more nodes in the
// same GraphBuilder, so the forward and backward graphs are one ONNX graph that ORT schedules as a whole.
// Each op's rule (rules.ts) is written with builder ops only; rules pick GPU-friendly ops (no Pad, no
// ScatterND, no ConstantOfShape) so the backward pass lands on the WebGPU EP like the forward pass.
import type { GraphBuilder } from '../graph/builder.ts';
import { GraphError } from '../graph/builder.ts';
import { type Node, type Value, fmtShape, isFloat } from '../graph/ir.ts';
import { GRAD_RULES, MULTI_OUTPUT_RULES, type MultiGradRule } from './rules.ts';

/**
 * Adds the backward pass for scalar `loss` to `b` and returns d loss / d x for each x in `wrt`, in order.
 * A value that `loss` does not depend on gets a zero gradient of its shape.
 */
export function gradients(b: GraphBuilder, loss: Value, wrt: readonly Value[]): Value[] {
  if (loss.shape.length !== 0)
    throw new GraphError(`gradients: loss must be a scalar, got ${fmtShape(loss.shape)}`);
  if (!isFloat(loss.dtype)) throw new GraphError('gradients: loss must be a float');
  const forward = b.nodes.slice(); // the backward nodes appended below are not differentiated again

  // Values that depend on some wrt through differentiable edges: only these carry gradients.
  const active = new Set<number>(wrt.map((v) => v.id));
  // A node with a hand-written gradient (GraphBuilder.withGradient) stands for its whole group: its
  // gradient flows to the group's inputs, and the group's own nodes are constants.
  const gradInputs = (node: Node): readonly Value[] =>
    b.customGradients.get(node.id)?.inputs ?? (node.stopGradient ? [] : node.inputs);
  for (const node of forward) {
    if (!gradInputs(node).some((v) => active.has(v.id))) continue;
    for (const out of node.outputs) if (isFloat(out.dtype)) active.add(out.id);
  }

  const pending = new Map<number, Value[]>();
  const push = (v: Value, g: Value) => {
    const list = pending.get(v.id);
    if (list) list.push(g);
    else pending.set(v.id, [g]);
  };
  // Sums the contributions of every use of `v` (an Add chain: variadic Sum runs on the CPU on WebGPU).
  const total = (v: Value): Value | null => {
    const list = pending.get(v.id);
    if (!list || list.length === 0) return null;
    if (list.length === 1) return list[0] ?? null;
    return b.scope(`grad/${v.name}`, () =>
      list.slice(1).reduce((acc, g) => b.add(acc, g, 'accumulate'), list[0] as Value),
    );
  };

  push(loss, b.scalar(1, loss.dtype));
  for (let i = forward.length - 1; i >= 0; i--) {
    const node = forward[i];
    if (!node) continue;
    const xs = gradInputs(node);
    if (xs.length === 0) continue;
    const dys = node.outputs.map((o) => (active.has(o.id) ? total(o) : null));
    if (dys.every((g) => !g)) continue;
    const needs = xs.map((v) => active.has(v.id));
    const grads = b.scope(`grad/${node.name}`, () => ruleFor(b, node)(dys, needs));
    xs.forEach((v, k) => {
      const g = grads[k];
      if (!needs[k] || !g) return;
      if (
        g.dtype !== v.dtype ||
        g.shape.length !== v.shape.length ||
        g.shape.some((d, j) => d !== v.shape[j])
      )
        throw new GraphError(
          `autodiff: ${node.op} rule gave ${g.dtype}${fmtShape(g.shape)} for ${v.dtype}${fmtShape(v.shape)}`,
        );
      push(v, g);
    });
  }
  return wrt.map((v) => total(v) ?? b.zeros(v.shape, v.dtype, `grad_zero/${v.name}`));
}

/** The gradient rule of `node`: its hand-written group gradient, or its op's rule. */
function ruleFor(
  b: GraphBuilder,
  node: Node,
): (dys: readonly (Value | null)[], needs: readonly boolean[]) => (Value | null)[] {
  const custom = b.customGradients.get(node.id);
  if (custom) return (dys, needs) => custom.rule(dys[0] as Value, needs);
  const rule = node.outputs.length === 1 ? GRAD_RULES[node.op] : null;
  if (rule) return (dys, needs) => rule(b, node, dys[0] as Value, needs);
  const multi: MultiGradRule | undefined = node.outputs.length > 1 ? MULTI_OUTPUT_RULES[node.op] : undefined;
  if (multi) return (dys, needs) => multi(b, node, dys, needs);
  throw new GraphError(`autodiff: no gradient rule for ${node.op} (node ${node.name})`);
}
