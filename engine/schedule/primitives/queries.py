"""Queries: get_block, get_loops, get_child_blocks, get_producers, get_consumers,
get_output_blocks.

They do not change the program but are recorded in the trace (as in TVM), because the
handles they return are what later instructions refer to.
"""
from __future__ import annotations

from engine.ir.stmt import Block, For

from ..error import ScheduleError
from ..registry import Ctx, Primitive, Result, fmt, register
from ._common import expect_block, subject_of


@register
class GetBlock(Primitive):
    kind = "GetBlock"
    attr_kinds = (("name", "str"), ("func_name", "str"))
    aliases = ("GetSBlock",)
    method = "get_block"
    mutates = False
    returns = "one"
    func_name_attr = 1
    dialect_method = {"tvm": "get_sblock"}

    def call(self, sch, name: str, func_name: str | None = None):
        """Retrieve a block in a specific function with its name.

        It requires: 1) a block of that name exists in the function; 2) the name is
        unique there. ``func_name`` may be omitted when the module has one function.
        ``"root"`` names the function's root block (a scope for get_output_blocks and
        get_child_blocks; it cannot be scheduled itself).

        .. code-block:: python

            sch = engine.Schedule(mm_relu)
            block_Y = sch.get_block("Y", func_name="mm_relu")

        Returns a BlockRV that stays valid across later primitives.
        """
        if not isinstance(name, str):
            raise ScheduleError("get_block", repr(name), "the block name must be a string",
                                'e.g. sch.get_block("Y")')
        fn = sch._resolve_func_name(func_name, "get_block")
        return sch._run(self, [], [name, fn])[0]

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        if len(attrs) < 1 or not isinstance(attrs[0], str):
            raise ctx.error("", "GetBlock needs the block name as its first attribute", "")
        name = attrs[0]
        blocks = ctx.index.blocks.get(name, [])
        if name != "root" or len(blocks) != 1:
            blocks = [b for b in blocks if b is not ctx.index.root_block]
        if not blocks:
            names = [b.name_hint for b in ctx.index.all_blocks()]
            raise ctx.error(f"block {name}", f"function {ctx.func_name} has no block named "
                            f"{name!r}", f"its blocks are: {', '.join(names) or '(none)'}")
        if len(blocks) > 1:
            raise ctx.error(f"block {name}", f"function {ctx.func_name} has {len(blocks)} "
                            f"blocks named {name!r}", "give the blocks unique names",
                            highlight=[name])
        return Result(None, [blocks[0]])

    def python_args(self, inputs, attrs, dialect):
        if dialect == "engine":
            return [self.attr(attrs, 0), f"func_name={self.attr(attrs, 1)}"]
        return [f"name={self.attr(attrs, 0)}", f"func_name={self.attr(attrs, 1)}"]


class _BlockQuery(Primitive):
    """A query from one block to a list of loops or blocks (:meth:`of`)."""

    mutates = False
    returns = "list"

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        return Result(None, self.of(ctx, expect_block(ctx, inputs[0])))

    def of(self, ctx: Ctx, block: Block) -> list:  # pragma: no cover - overridden
        raise NotImplementedError


@register
class GetLoops(_BlockQuery):
    kind = "GetLoops"
    attr_kinds = ()
    method = "get_loops"

    def call(self, sch, block):
        """Get the loops above a block, outermost first (up to its enclosing block).

        It requires: 1) ``block`` is a valid block handle.

        .. code-block:: python

            i, j, k = sch.get_loops(sch.get_block("Y"))
        """
        return list(sch._run(self, [block], []))

    def of(self, ctx: Ctx, block: Block) -> list:
        return ctx.index.loops_above(ctx.index.realize[id(block)])


@register
class GetChildBlocks(Primitive):
    kind = "GetChildBlocks"
    attr_kinds = ()
    method = "get_child_blocks"
    mutates = False
    returns = "list"

    def call(self, sch, block_or_loop):
        """Get the blocks directly under a block or a loop (not nested in another block).

        It requires: 1) ``block_or_loop`` is a valid block or loop handle.
        """
        return list(sch._run(self, [block_or_loop], []))

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        node = inputs[0]
        if not isinstance(node, (Block, For)):
            raise ctx.error(subject_of(node), "expected a block or loop handle", "")
        return Result(None, ctx.index.child_blocks(node))


def scope_siblings(ctx: Ctx, block: Block) -> list[Block]:
    """Blocks in the same scope as ``block`` (children of its scope block), in order."""
    scope = ctx.index.scope_block(ctx.index.realize[id(block)])
    return ctx.index.child_blocks(scope)


def _linked_siblings(ctx: Ctx, block: Block, after: bool) -> list[Block]:
    """Blocks of ``block``'s scope linked to it through a buffer: with ``after`` False the
    blocks before it writing a buffer it reads, with ``after`` True the blocks after it
    reading a buffer it writes."""
    mine = {id(x.buffer) for x in (block.writes if after else block.reads)}
    order = ctx.index.order
    me = order[id(block)]
    return [b for b in scope_siblings(ctx, block)
            if b is not block and (order[id(b)] > me if after else order[id(b)] < me)
            and any(id(x.buffer) in mine for x in (b.reads if after else b.writes))]


def producers_of(ctx: Ctx, block: Block) -> list[Block]:
    """Blocks of the same scope, before ``block``, that write a buffer it reads."""
    return _linked_siblings(ctx, block, after=False)


def consumers_of(ctx: Ctx, block: Block) -> list[Block]:
    """Blocks of the same scope, after ``block``, that read a buffer it writes."""
    return _linked_siblings(ctx, block, after=True)


@register
class GetProducers(_BlockQuery):
    kind = "GetProducers"
    attr_kinds = ()
    method = "get_producers"

    def call(self, sch, block):
        """Get the producers of a block: the blocks of the same scope, before it, that
        write a buffer it reads.

        It requires: 1) ``block`` is a valid block handle.
        """
        return list(sch._run(self, [block], []))

    def of(self, ctx: Ctx, block: Block) -> list:
        return producers_of(ctx, block)


@register
class GetConsumers(_BlockQuery):
    kind = "GetConsumers"
    attr_kinds = ()
    method = "get_consumers"

    def call(self, sch, block):
        """Get the consumers of a block: the blocks of the same scope, after it, that
        read a buffer it writes.

        It requires: 1) ``block`` is a valid block handle.
        """
        return list(sch._run(self, [block], []))

    def of(self, ctx: Ctx, block: Block) -> list:
        return consumers_of(ctx, block)


def output_blocks(ctx: Ctx, scope: Block) -> list[Block]:
    """Blocks under ``scope`` (nested ones too, in execution order) that write a buffer
    their own scope block does not allocate (TVM's output blocks)."""
    out = []
    for b in ctx.index.blocks_under(scope):
        allocated = {id(x) for x in ctx.index.scope_block(ctx.index.realize[id(b)])
                     .alloc_buffers}
        if any(id(r.buffer) not in allocated for r in b.writes):
            out.append(b)
    return out


@register
class GetOutputBlocks(Primitive):
    kind = "GetOutputBlocks"
    attr_kinds = ()
    method = "get_output_blocks"
    mutates = False
    returns = "list"

    def call(self, sch, scope_block):
        """Get the output blocks of a scope: the blocks under ``scope_block`` (at any depth)
        that write a buffer which their scope block does not allocate (a parameter of
        the function, or a buffer of an outer scope).

        It requires: 1) ``scope_block`` is a valid block handle (``sch.get_block("root")``
        for the whole function).

        .. code-block:: python

            # Y is an intermediate buffer, C the function's output
            root = sch.get_block("root")
            (c_block,) = sch.get_output_blocks(root)      # the block "C"
        """
        return list(sch._run(self, [scope_block], []))

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        node = inputs[0]
        if not isinstance(node, Block):
            raise ctx.error(subject_of(node), f"the block argument must be a block handle, "
                            f"got {subject_of(node)}", "get blocks with sch.get_block(name)")
        return Result(None, output_blocks(ctx, node))

    def python_args(self, inputs, attrs, dialect):
        return [fmt(inputs[0]) if dialect == "engine" else f"scope_block={fmt(inputs[0])}"]


@register
class EnterPostproc(Primitive):
    kind = "EnterPostproc"
    attr_kinds = ()
    method = "enter_postproc"
    mutates = False

    def call(self, sch):
        """A no-op marker that TVM's tuned traces contain before post-processing steps
        (``sch.enter_postproc()``); accepted so such traces import unchanged."""
        sch._run(self, [], [])

    def apply(self, ctx: Ctx, inputs, attrs) -> Result:
        return Result(None, [])
