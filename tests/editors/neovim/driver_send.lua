-- Headless Neovim driver for tests/editors/neovim/test_neovim_send.py: the documented configuration
-- with its "send" snippet (docs/editors.md). The prompt's model-facing text is asked for as the
-- server serves it (what a person would look at first), then `<Leader>dS` is typed and the message
-- the snippet shows is read.
--
-- Run as `nvim --headless --clean -n -u driver_send.lua prompt.md` with DSH_EDITOR_SPEC naming a
-- JSON file: config (the documented blocks, pointed at the test's store and dsh web), result,
-- timeout_ms.

local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h")
local H = dofile(here .. "/harness.lua")
local result, wait_for, keys = H.result, H.wait_for, H.keys
result.notes = {}

H.load_config()

local notify = vim.notify
vim.notify = function(message, level, opts)
  table.insert(result.notes, { message = message, level = level })
  return notify(message, level, opts)
end

H.start(function()
  local bufnr = vim.api.nvim_get_current_buf()
  wait_for("the server to attach", function()
    return next(vim.lsp.buf_get_clients(bufnr)) ~= nil
  end, function()
    local model_text = nil
    local params = { command = "dshSessionReference.modelText", arguments = { vim.uri_from_bufnr(bufnr) } }
    vim.lsp.buf_request(bufnr, "workspace/executeCommand", params, function(err, answer)
      model_text = err and ("error: " .. err.message) or answer.text
    end)
    wait_for("the model-facing text", function()
      return model_text
    end, function(text)
      result.model_text = text
      keys("<Leader>dS")
      wait_for("the message of the send", function()
        return result.notes[1] -- the snippet's message, sent or not
      end, function(note)
        result.sent = note
        H.finish(nil)
      end)
    end)
  end)
end)
