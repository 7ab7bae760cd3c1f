-- Headless Neovim 0.7 driver for tests/editors/neovim/test_neovim.py.
--
-- Run as `nvim --headless --clean -n -u driver.lua prompt.md` with DSH_EDITOR_SPEC naming a JSON file:
--   config      the user's configuration: the Neovim 0.7 block of docs/editors.md, pointed at the
--               test's server and sample store
--   result      where to write the JSON result
--   pick        which completion item to accept (1-based, chosen with <C-n>)
--   timeout_ms  hard limit for the whole run
-- Everything the user does is typed as keys through the real input loop: `A @<C-x><C-o>`,
-- `<C-n><C-y><Esc>`, `<Leader>dq`, `<Leader>dp`. Each step waits on a timer for what the editor
-- shows, so Neovim's own event loop runs between keys as it does for a person. Then sessions.lua's
-- steps (issue 19), with the spec's `sessions`.

local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":h")
local H = dofile(here .. "/harness.lua")
local sessions = dofile(here .. "/sessions.lua")
local spec, result, finish, guard, wait_for, keys = H.spec, H.result, H.finish, H.guard, H.wait_for, H.keys
result.steps, result.messages, result.select_prompts = {}, {}, {}

local function diagnostics(bufnr)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(out, {
      lnum = d.lnum,
      col = d.col,
      end_lnum = d.end_lnum,
      end_col = d.end_col,
      severity = d.severity,
      message = d.message,
      source = d.source,
      code = d.code,
    })
  end
  return out
end

local function errors(bufnr)
  return vim.diagnostic.get(bufnr, { severity = vim.diagnostic.severity.ERROR })
end

local function lines(bufnr)
  return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
end

local function preview_buffer()
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf):find("^dsh%-preview:") and #lines(buf) > 1 then
      return buf
    end
  end
end

-- ---- the user's configuration, as documented ----

H.load_config()

-- A picker such as dressing.nvim or telescope-ui-select replaces vim.ui.select; this one takes
-- the server's preferred action, as <CR> on such a picker's first row would.
vim.ui.select = function(items, opts, on_choice)
  local titles = {}
  local choice = nil
  for index, item in ipairs(items) do
    titles[index] = opts.format_item and opts.format_item(item) or tostring(item)
    if choice == nil and type(item[2]) == "table" and item[2].isPreferred then
      choice = index
    end
  end
  table.insert(result.select_prompts, { prompt = opts.prompt, kind = opts.kind, titles = titles })
  choice = choice or 1
  result.chosen_action = titles[choice]
  on_choice(items[choice], choice)
end

local show_message = vim.lsp.handlers["window/showMessage"]
vim.lsp.handlers["window/showMessage"] = function(err, message, ctx, config)
  table.insert(result.messages, message)
  return show_message(err, message, ctx, config)
end

-- ---- the scripted session ----

local function run()
  local bufnr = vim.api.nvim_get_current_buf()
  result.lines_at_open = lines(bufnr)

  wait_for("the configuration to attach the server", function()
    return next(vim.lsp.buf_get_clients(bufnr))
  end, function()
    -- 1. The noncanonical URI in the opened file is flagged.
    wait_for("an error diagnostic on open", function()
      return #errors(bufnr) > 0
    end, function()
      result.steps.open = { diagnostics = diagnostics(bufnr) }

      -- 2. Type `@` at the end of the last line and ask for omni completion.
      vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(bufnr), 0 })
      keys("A @<C-x><C-o>")
      wait_for("the completion menu after @", function()
        local info = vim.fn.complete_info({ "items", "mode" })
        return vim.fn.mode() == "i" and #info.items > 0 and info
      end, function(info)
        local items = {}
        for _, item in ipairs(info.items) do
          table.insert(items, { word = item.word, abbr = item.abbr, menu = item.menu, kind = item.kind })
        end
        result.steps.complete = { items = items, line = vim.api.nvim_get_current_line() }

        -- 3. Pick the spec.pick-th item and accept it, then leave insert mode.
        local changedtick = vim.api.nvim_buf_get_changedtick(bufnr)
        keys(string.rep("<C-n>", spec.pick) .. "<C-y><Esc>")
        wait_for("the accepted mention in normal mode", function()
          return vim.fn.mode() == "n"
            and vim.api.nvim_buf_get_changedtick(bufnr) > changedtick
            and vim.api.nvim_get_current_line():find("dsh-session:", 1, true)
        end, function()
          result.steps.accept = { line = vim.api.nvim_get_current_line() }

          -- 4. Cursor on the flagged URI, then the quick-fix key.
          local bad = errors(bufnr)[1]
          vim.api.nvim_win_set_cursor(0, { bad.lnum + 1, bad.col })
          local before = lines(bufnr)[bad.lnum + 1]
          local fix_tick = vim.api.nvim_buf_get_changedtick(bufnr)
          keys("<Leader>dq")
          wait_for("the quick fix edit and the diagnostic to clear", function()
            return lines(bufnr)[bad.lnum + 1] ~= before
              and vim.api.nvim_buf_get_changedtick(bufnr) > fix_tick
              and #errors(bufnr) == 0
          end, function()
            result.steps.fix = {
              line_before = before,
              line_after = lines(bufnr)[bad.lnum + 1],
              diagnostics = diagnostics(bufnr),
            }
            result.lines_at_end = lines(bufnr)

            -- 5. The preview key.
            keys("<Leader>dp")
            wait_for("the preview buffer", preview_buffer, function(buf)
              result.preview = {
                name = vim.api.nvim_buf_get_name(buf),
                lines = lines(buf),
                shown = vim.fn.bufwinid(buf) ~= -1,
                modifiable = vim.bo[buf].modifiable,
              }
              -- The summary notification may trail the command's response by a moment.
              wait_for("the preview's showMessage", function()
                return #result.messages > 0
              end, function()
                -- 6. Issue 19: insert a mention, its transcript, code lens, workspace symbols.
                sessions.run(H, bufnr, function()
                  finish(nil)
                end)
              end)
            end)
          end)
        end)
      end)
    end)
  end)
end

H.start(run)
