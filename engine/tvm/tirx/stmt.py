"""``tvm.tirx.stmt``: the engine's statement classes under TVM 0.27's names (``SBlock`` is
the engine's ``Block``, ``SBlockRealize`` its ``BlockRealize``)."""
from engine.ir.stmt import (Allocate, Block, BlockRealize, BufferStore, Evaluate, For, ForKind,
                            IfThenElse, IterType, IterVar, LetStmt, SeqStmt, Stmt)

SBlock = Block
SBlockRealize = BlockRealize

__all__ = ["Stmt", "For", "ForKind", "SBlock", "SBlockRealize", "Block", "BlockRealize",
           "BufferStore", "SeqStmt", "IfThenElse", "Evaluate", "LetStmt", "Allocate",
           "IterVar", "IterType"]
