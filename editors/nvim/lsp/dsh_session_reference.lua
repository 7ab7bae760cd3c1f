-- dsh-session-reference for Neovim 0.11+ (`:h lsp-config`). Put editors/nvim on 'runtimepath'
-- (or copy lsp/ and ftdetect/ into ~/.config/nvim), then `vim.lsp.enable("dsh_session_reference")`.
-- Settings go in `vim.lsp.config("dsh_session_reference", { settings = { dshSessionReference = {...} } })`.
return {
  cmd = { "dsh-session-reference", "lsp" }, -- on PATH after `pipx install dsh-session-reference`
  filetypes = { "markdown", "text" },
  root_markers = { ".git" },
  settings = { dshSessionReference = {} },
  -- Have the server say when a shown transcript changes (docs/editors.md handles the notification).
  capabilities = vim.tbl_deep_extend("force", vim.lsp.protocol.make_client_capabilities(), {
    experimental = { dshSessionReference = { contentChanged = true } },
  }),
}
